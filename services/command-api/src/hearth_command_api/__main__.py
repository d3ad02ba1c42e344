"""``python -m hearth_command_api``: serve the command API with uvicorn."""

from __future__ import annotations

import uvicorn

from hearth_command_api.app import make_app
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.adapters.collector import collect_less_often, freeze_started_state


def main() -> None:
    settings = CommandApiSettings()
    collect_less_often()  # requests in flight and the device book: see the module
    app = make_app(settings)
    freeze_started_state()  # the app, its routes and schemas
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", access_log=False)


if __name__ == "__main__":
    main()
