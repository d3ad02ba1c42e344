"""The command API as an administrator, for the CLI's admin commands (campaigns, quarantine): an admin
token signed with the local stack's secret (``--stack-dir``; HEARTH_TOKEN_SECRET wins), and an answer of
4xx/5xx printed as it came (the API says what is wrong) with exit code 1."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from hearth.support.stack_dir import token_secret
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.auth import create_token

Api = Annotated[str, typer.Option(help="The command API")]
console = Console(stderr=True, soft_wrap=True)


def admin_client(api: str, home: Path) -> httpx.Client:
    """A client of ``api`` with an admin token signed with the secret of the stack in ``home``."""
    stack = StackSettings(token_secret=token_secret(home.resolve()))
    token = create_token(stack.token_secret, admin=True)
    return httpx.Client(base_url=api, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)


def checked(response: httpx.Response) -> Any:
    """The answer's JSON (None for an empty body), or exit 1 with the API's own words."""
    if response.status_code >= 400:
        console.print(f"[red]{response.status_code}[/red] {response.text}")
        raise typer.Exit(1)
    return response.json() if response.content else None


__all__ = ["Api", "admin_client", "checked"]
