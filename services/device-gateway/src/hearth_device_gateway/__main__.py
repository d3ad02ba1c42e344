"""``python -m hearth_device_gateway``: run one device-gateway process until SIGINT or SIGTERM.

On uvloop: every device message costs the gateway a task (gmqtt's handler), a future and a few loop
rounds, so the event loop is a good part of its CPU per message (``hearth bench gateway --profile``);
uvloop's loop took about a tenth off the uplink's own code alone (docs/BENCHMARKS.md, device gateway).
"""

from __future__ import annotations

import logging

import uvloop

from hearth_device_gateway.app import make_app, run_until_signalled
from hearth_device_gateway.settings import DeviceGatewaySettings


def main() -> None:
    settings = DeviceGatewaySettings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("gmqtt").setLevel(logging.WARNING)  # it logs every (UN)SUBACK at INFO
    uvloop.run(run_until_signalled(make_app(settings)))


if __name__ == "__main__":
    main()
