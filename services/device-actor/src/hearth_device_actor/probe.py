"""``python -m hearth_device_actor.probe``: healthy when the workers' faust consumer group
(``<app_id>-<topic prefix>``) is Stable with at least one member, i.e. some worker holds the twins'
partitions and so reads the inbox. compose.yaml runs it as the device actor's health check."""

from __future__ import annotations

import sys

from hearth_device_actor.settings import DeviceActorSettings
from hearth_shared.probe import run_probe, stable_group


async def actor_group_problem() -> str | None:
    settings = DeviceActorSettings()
    group = f"{settings.app_id}-{settings.stack.topic_prefix}"
    return await stable_group(settings.stack.kafka_bootstrap_servers, group)


if __name__ == "__main__":
    sys.exit(run_probe(actor_group_problem))
