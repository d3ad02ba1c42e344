"""``python -m hearth_automations``: run one automations process (no web server)."""

from __future__ import annotations

import asyncio
import logging

from hearth_automations.app import make_app
from hearth_automations.settings import AutomationsSettings


def main() -> None:
    settings = AutomationsSettings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    asyncio.run(make_app(settings).run())


if __name__ == "__main__":
    main()
