"""``hearth token create|revoke``: make API tokens and page links, and end them.

Tokens are signed with the local stack's secret (``--stack-dir``; HEARTH_TOKEN_SECRET wins); a
revocation is a ``token.revoked`` fact written to the broker in HEARTH_KAFKA_BOOTSTRAP_SERVERS, which
every API process follows (see hearth_shared.schema.auth and hearth_shared.adapters.revocations).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Annotated

import typer
from rich.console import Console

from hearth.support.stack_dir import DEFAULT_HOME, Home, token_secret
from hearth_shared.adapters.settings import StackSettings

token_app = typer.Typer(
    help="API tokens: create (with an expiry, or a page link) and revoke.", no_args_is_help=True
)
console = Console(stderr=True, soft_wrap=True)


@token_app.command("create")
def token_create(
    home_id: Annotated[str | None, typer.Option("--home", help="The home this token may see")] = None,
    admin: Annotated[bool, typer.Option("--admin", help="An admin token (all homes, provisioning)")] = False,
    expires_in: Annotated[
        str | None,
        typer.Option(
            help="Lifetime, e.g. 15m, 12h, 90d; `never` for admin tokens only. "
            "Default: 90d for a home token, 30d for an admin token, 15m for a --link"
        ),
    ] = None,
    link: Annotated[
        bool, typer.Option("--link", help="A single-use link token for the live page (prints its URL)")
    ] = False,
    query_api: Annotated[str, typer.Option(help="The live page's base URL, with --link")] = (
        "http://127.0.0.1:8001"
    ),
    home: Home = DEFAULT_HOME,
) -> None:
    """Print a new token on stdout and nothing else (its id and expiry go to stderr)."""
    from hearth_shared.schema.auth import issue, parse_duration

    if admin == (home_id is not None):
        console.print("give exactly one of --home H or --admin")
        raise typer.Exit(2)
    try:
        lifetime = None if expires_in is None else parse_duration(expires_in)
        token, claims = issue(
            token_secret(home.resolve()),
            home_id=home_id,
            admin=admin,
            expires_in=lifetime,
            kind="link" if link else "api",
        )
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    sys.stdout.write((f"{query_api.rstrip('/')}/?token={token}" if link else token) + "\n")
    console.print(f"token id {claims.jti}, expires {_when(claims.exp)}")


@token_app.command("revoke")
def token_revoke(
    token: Annotated[str, typer.Argument(help="The token's id (or the token itself)")],
    reason: Annotated[str, typer.Option(help="Why, for the record")] = "",
) -> None:
    """Revoke a token: every API refuses it (401) and closes its websockets (4401) within seconds.

    Writes a token.revoked fact to the revocations topic of the broker in HEARTH_KAFKA_BOOTSTRAP_SERVERS.
    """
    from hearth_shared.adapters.revocations import revoke
    from hearth_shared.schema.auth import InvalidToken, token_id
    from hearth_shared.schema.ids import is_identifier
    from hearth_shared.schema.revocations import token_revoked

    if token.startswith("hth"):
        try:
            token = token_id(token)
        except InvalidToken as exc:
            console.print(f"[red]{exc}[/]")
            raise typer.Exit(2) from exc
    if not is_identifier(token):
        console.print(f"[red]{token!r} is not a token id[/]")
        raise typer.Exit(2)
    stack = StackSettings()
    asyncio.run(
        revoke(stack.kafka_bootstrap_servers, stack.topics, token_revoked(token, reason=reason, by="cli"))
    )
    console.print(f"revoked token {token}")


def _when(exp: int | None) -> str:
    if exp is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(exp))
