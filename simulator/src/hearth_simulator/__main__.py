"""``python -m hearth_simulator``: play every simulated device of a known type over MQTT until stopped."""

from __future__ import annotations

import asyncio
import logging
import signal

from hearth_simulator.fleet import run_fleet
from hearth_simulator.settings import SimulatorSettings


async def _main(settings: SimulatorSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
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
