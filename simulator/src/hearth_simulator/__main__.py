"""``python -m hearth_simulator``: play every simulated device of a known type over MQTT until stopped."""

from __future__ import annotations

import asyncio
import logging

from hearth_shared.adapters.stop_signals import stop_on_signals
from hearth_simulator.fleet import run_fleet
from hearth_simulator.settings import SimulatorSettings


async def _main(settings: SimulatorSettings) -> None:
    stop = stop_on_signals()
    await run_fleet(
        settings.stack.kafka_bootstrap_servers,
        settings.stack.topics,
        settings.fleet_options(),
        settings.mqtt(),
        stop,
    )


def main() -> None:
    settings = SimulatorSettings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("gmqtt").setLevel(logging.WARNING)
    asyncio.run(_main(settings))


if __name__ == "__main__":
    main()
