"""``python -m hearth_analytics stream|archive|batch|train [--master URL]``.

* ``stream``: the rollup and training queries, until Ctrl-C (``--once``: process what the journal holds
  now, then exit).
* ``archive``: the journal into the archive table (``hearth_analytics.jobs.archive``), until Ctrl-C
  (``--once``: what the journal holds now, then exit).
* ``batch``: the daily report (Parquet, charts, a summary) from the whole journal.
* ``runtime``: the runtime report (heating and cooling per local day, degree-days, what changed it) from
  the whole journal and the home journal, published to the rollups topic for the query API.
* ``train``: a full retrain from the whole journal, published as a new model version.
* ``learn``: suggested programs and rooms' responses from the whole journal, new ones published to the
  home journal (``hearth_analytics.jobs.learn``).

Settings come from ``HEARTH_ANALYTICS_*`` and ``HEARTH_*`` (see ``settings.py``). Under ``spark-submit``
the master and the Kafka connector come from spark-submit, e.g. ``spark-submit --master
spark://spark-master:7077 --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0
analytics/src/hearth_analytics/__main__.py stream``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from hearth_analytics.jobs.archive import run_archive
from hearth_analytics.jobs.batch import run_batch
from hearth_analytics.jobs.learn import run_learn
from hearth_analytics.jobs.runtime_report import run_runtime
from hearth_analytics.jobs.stream import run_stream
from hearth_analytics.jobs.train import run_train
from hearth_analytics.settings import AnalyticsSettings


def make_settings(master: str | None = None) -> AnalyticsSettings:
    settings = AnalyticsSettings()
    return settings.model_copy(update={"master": master}) if master else settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hearth_analytics",
        description="Hearth analytics on Spark: stream, archive, batch, runtime, train, learn.",
    )
    parser.add_argument("--log-level", default="INFO")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in [
        ("stream", "windowed rollups and streaming training (Structured Streaming)"),
        ("archive", "every journal fact into the archive table (Structured Streaming, Parquet)"),
        ("batch", "daily report from the whole journal: Parquet, charts, summary"),
        ("runtime", "runtime report per thermostat, home and local day, published for the query API"),
        ("train", "retrain the anomaly model from the whole journal and publish it"),
        ("learn", "suggest programs from manual changes and fit each room's response (preheat)"),
    ]:
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("--master", help="Spark master URL (default: local[2], or spark-submit's)")
        if name in ("stream", "archive"):
            command.add_argument("--once", action="store_true", help="process what is there now, then exit")
        if name == "batch":
            command.add_argument(
                "--output", type=Path, help="report directory (default: settings.output_dir)"
            )
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings = make_settings(args.master)
    if args.command == "stream":
        run_stream(settings, once=args.once)
    elif args.command == "archive":
        run_archive(settings, once=args.once)
    elif args.command == "batch":
        run_batch(settings, output_dir=args.output)
    elif args.command == "runtime":
        run_runtime(settings)
    elif args.command == "learn":
        learned = run_learn(settings)
        print(
            f"published {len(learned.suggestions)} suggested programs and {len(learned.responses)} room "
            f"responses ({learned.already_published} found already published)"
        )
    else:
        model = run_train(settings)
        print(f"published {model.name} version {model.version} (trained on {model.trained_on} readings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
