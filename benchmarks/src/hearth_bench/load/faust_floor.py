"""A second floor for the device-actor bench: a faust agent that takes the inbox in batches and does
nothing else. What it reaches is faust's own ceiling on this machine, before any Hearth code runs.

Run as a worker process by ``hearth_bench.benches.actor``: ``python -m hearth_bench.load.faust_floor`` with
BENCH_BOOTSTRAP, BENCH_TOPIC, BENCH_EXPECTED in the environment; prints ``RATE <events/s>`` and exits.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid

import faust


def main() -> None:
    expected = int(os.environ["BENCH_EXPECTED"])
    app = faust.App(
        f"bench-faust-floor-{uuid.uuid4().hex[:6]}",
        broker=f"kafka://{os.environ['BENCH_BOOTSTRAP']}",
        store="memory://",
        datadir=tempfile.mkdtemp(prefix="hearth-faust-floor-"),  # faust's default: a directory in the cwd
        web_enabled=False,
        consumer_auto_offset_reset="earliest",
        stream_buffer_maxsize=10_000,
        broker_max_poll_records=5000,
    )
    topic = app.topic(os.environ["BENCH_TOPIC"], key_type=bytes, value_type=bytes)
    seen = {"n": 0, "first": 0.0}

    @app.agent(topic)
    async def count(stream: faust.StreamT[bytes]) -> None:
        assert isinstance(stream, faust.Stream)  # take_events is on faust.Stream, not on StreamT
        async for batch in stream.take_events(5000, within=0.05):
            seen["first"] = seen["first"] or time.perf_counter()
            seen["n"] += len(batch)
            if seen["n"] >= expected:
                print(f"RATE {seen['n'] / (time.perf_counter() - seen['first']):.0f}", flush=True)
                os._exit(0)

    sys.argv = [sys.argv[0], "worker", "--without-web", "--loglevel", "warn"]
    app.main()


if __name__ == "__main__":
    main()
