"""``hearth bench learn`` at a tiny size on the real broker and the session's Spark: six weeks of five
homes appended to the journal, the learn job over the first four, the held-out two replayed. The
figures must be computed and in range; their values are the bench's to report, not this test's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from hearth_bench.benches.learn import LearnBench, run_learn_bench
from hearth_shared.adapters.settings import StackSettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # Spark on 2 loaded cores

HOMES = 5


def test_the_learn_bench_computes_every_figure_at_a_tiny_size(
    spark: Any, broker_only: StackSettings, tmp_path: Path
) -> None:
    result = run_learn_bench(
        broker_only, spark, tmp_path, LearnBench(homes=HOMES, weeks=6, train_weeks=4, workers=1)
    )

    assert result["reports"] >= HOMES * 42 * 96  # a reading every 15 minutes at the least
    assert result["facts"] > result["reports"]  # registrations and the actor's online facts with them
    assert 0 < result["suggestions"] <= HOMES and 0 < result["responses_with_heating"] <= HOMES
    assert result["held_out_changes"] > 0
    for share in ("unnecessary_share", "unnecessary_share_own_program"):
        assert 0.0 <= result[share] <= 1.0, share
    assert result["miss_programmed_min"] >= 0 and result["miss_preheated_min"] >= 0
    assert result["miss_cut"] is None or result["miss_cut"] <= 1.0
    assert result["heating_own_h"] > 0 and result["heating_preheated_h"] > 0
    assert math.isfinite(result["heating_ratio"]) and result["heating_ratio"] > 0
    assert result["scan_s"] > 0 and result["learn_s"] > 0 and result["learn_to_scan"] > 0
    assert result["rows"][0]["figure"].startswith("manual changes")
    assert result["notes"].endswith(".")
