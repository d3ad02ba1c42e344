"""``python -m tests.support.report_runs OUT RUNS``: the daily report ``RUNS`` times in one Spark session
built from the environment's settings (``HEARTH_ANALYTICS_*``), each into ``OUT/<run>``; prints a line a
run: ``report <run> <facts> <archive days> <days computed>``. For a test over an S3 archive, whose own
session (the ``spark`` fixture) has no s3a settings."""

from __future__ import annotations

import sys
from pathlib import Path

from hearth_analytics.jobs.batch import build_report
from hearth_analytics.settings import AnalyticsSettings
from hearth_analytics.spark import build_session


def main(out: Path, runs: int) -> None:
    settings = AnalyticsSettings()
    spark = build_session(settings, "hearth-test-report-runs")
    try:
        for run in range(runs):
            made = build_report(spark, settings, out / str(run))
            print(f"report {run} {made.facts} {made.archive_days} {made.archive_days_computed}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
