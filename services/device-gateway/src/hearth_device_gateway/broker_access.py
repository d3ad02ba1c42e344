"""``python -m hearth_device_gateway.broker_access``: run one broker's access follower until SIGINT or
SIGTERM, or until its feed fails (then the process exits with that error and its supervisor restarts it).
The follower, and why it is a process of its own beside the broker: entrypoints/broker_access_follower.py.
"""

from __future__ import annotations

import asyncio
import logging

from hearth_device_gateway.app import make_follower
from hearth_shared.adapters.stop_signals import stop_on_signals


async def _serve() -> None:
    follower = make_follower()
    await follower.start()
    stopped = stop_on_signals()
    try:
        # Whichever comes first: a stop signal, or the follower failing (then the process exits with it).
        await asyncio.wait(
            [asyncio.ensure_future(stopped.wait()), asyncio.ensure_future(follower.wait_stopped())],
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        await follower.stop()
    if follower.failed is not None:
        raise follower.failed


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve())


if __name__ == "__main__":
    main()
