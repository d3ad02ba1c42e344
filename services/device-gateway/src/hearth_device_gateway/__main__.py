"""``python -m hearth_device_gateway``: run one device-gateway process until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import logging

from hearth_device_gateway.app import make_app, run_until_signalled
from hearth_device_gateway.settings import DeviceGatewaySettings


def main() -> None:
    settings = DeviceGatewaySettings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("gmqtt").setLevel(logging.WARNING)  # it logs every (UN)SUBACK at INFO
    asyncio.run(run_until_signalled(make_app(settings)))


if __name__ == "__main__":
    main()
