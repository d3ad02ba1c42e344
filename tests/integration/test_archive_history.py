"""Batch jobs over the archive plus the journal's tail beyond it, on real Kafka and Spark: the daily report
and the full retrain equal what the journal alone gives; the tail is read from Kafka only past the
archive (a history whose archive covers part of the journal, the rest arriving after the archive ran);
a second report reads the archive day's kept parts back (``archive_day_parts``) and gives the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hearth_analytics.jobs.archive import start_archive
from hearth_analytics.jobs.batch import KEYS, build_report
from hearth_analytics.jobs.train import train_from_history
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.sources.history import read_history
from hearth_shared.adapters.settings import StackSettings
from tests.support.known_history import known_history
from tests.support.topics import produce_facts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # four Spark jobs on 2 loaded cores


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


async def test_report_and_retrain_from_archive_and_tail_equal_the_journal_alone(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    facts = known_history().facts
    split = len(facts) * 2 // 3
    await produce_facts(stack, facts[:split])
    archived = AnalyticsSettings(
        stack=stack,
        checkpoint_dir=tmp_path / "ckpt",
        archive_url=str(tmp_path / "archive"),
        model_min_count=1,
    )
    start_archive(spark, archived, once=True).awaitTermination()
    await produce_facts(stack, facts[split:])
    journal_only = archived.model_copy(update={"archive_url": str(tmp_path / "no-archive")})

    history = read_history(spark, archived)
    assert history.count() == len(facts)
    assert read_history(spark, archived).where("offset IS NULL").count() == 0
    from_archive = spark.read.parquet(archived.archive_location()).count()
    assert 0 < from_archive == split < len(facts)  # the report below really reads both parts

    alone = build_report(spark, journal_only, tmp_path / "alone")
    assert alone.facts == len(facts)
    for run, computed in (("computed", 1), ("read back", 0)):  # the archive day's parts, then kept ones
        with_archive = build_report(spark, archived, tmp_path / run)
        assert (with_archive.facts, with_archive.archive_days_computed) == (len(facts), computed), run
        pd.testing.assert_frame_equal(
            _sorted(pd.read_parquet(with_archive.devices_path), KEYS),
            _sorted(pd.read_parquet(alone.devices_path), KEYS),
        )
        pd.testing.assert_frame_equal(
            _sorted(with_archive.homes, ["day", "home_id"]), _sorted(alone.homes, ["day", "home_id"])
        )

    model_archive = train_from_history(spark, archived)
    model_journal = train_from_history(spark, journal_only)
    assert model_archive.trained_on == model_journal.trained_on > 0
    assert model_archive.by_device == model_journal.by_device and model_archive.by_device
    assert model_archive.by_type == model_journal.by_type
