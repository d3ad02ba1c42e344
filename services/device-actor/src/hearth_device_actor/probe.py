"""``python -m hearth_device_actor.probe``: healthy when this worker serves, i.e. reads inbox partitions
whose twins it holds, or holds none while the other workers of its group own them all (an idle spare);
not while it joins, while its group rebalances, or while it holds nothing and some partition has no
owner. It reads the serving file the worker keeps in its data directory (adapters/serving.py says how, and why
the broker is asked only about a worker that holds nothing). compose.yaml runs it as the device actor's
health check; ``hearth up``'s supervisor calls the same ``serving_problem``."""

from __future__ import annotations

import sys

from hearth_device_actor.adapters.serving import serving_file, serving_problem
from hearth_device_actor.settings import DeviceActorSettings


def worker_problem() -> str | None:
    settings = DeviceActorSettings()
    return serving_problem(serving_file(settings.data_dir), settings.stack.kafka_bootstrap_servers)


if __name__ == "__main__":
    problem = worker_problem()
    if problem:
        print(problem, file=sys.stderr)
    sys.exit(1 if problem else 0)
