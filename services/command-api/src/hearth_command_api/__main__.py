"""``python -m hearth_command_api``: serve the command API with uvicorn."""

from __future__ import annotations

import uvicorn

from hearth_command_api.app import make_app
from hearth_command_api.settings import CommandApiSettings


def main() -> None:
    settings = CommandApiSettings()
    uvicorn.run(
        make_app(settings), host=settings.host, port=settings.port, log_level="info", access_log=False
    )


if __name__ == "__main__":
    main()
