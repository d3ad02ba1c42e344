"""``python -m tests.support.archive_then_reports OUT RUNS``: in one Spark session built from the
environment's settings (``HEARTH_ANALYTICS_*``), the archive job once over what the journal holds
(``run_archive``, as ``python -m hearth_analytics archive --once`` runs it), then the daily report ``RUNS``
times, each into ``OUT/<run>``; prints a line a run: ``report <run> <facts> <archive days> <days
computed>``. For a test over an S3 archive, whose own session (the ``spark`` fixture) has no s3a
settings: one JVM for both instead of a process each."""

from __future__ import annotations

import sys
from pathlib import Path

from hearth_analytics.jobs.archive import run_archive
from hearth_analytics.jobs.batch import build_report
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.spark import build_session


def main(out: Path, runs: int) -> None:
    settings = AnalyticsSettings()
    spark = build_session(settings, "hearth-test-archive-then-reports")
    try:
        run_archive(settings, once=True, spark=spark)
        print("archived", flush=True)
        for run in range(runs):
            made = build_report(spark, settings, out / str(run))
            print(f"report {run} {made.facts} {made.archive_days} {made.archive_days_computed}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
