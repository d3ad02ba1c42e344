"""FastAPI dependencies of the command API, as ``Annotated`` aliases.

All ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop per
dependency per request for what is an attribute lookup.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from hearth_command_api.ports import CommandJournal
from hearth_command_api.registry import RegistryView
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.auth import Principal
from hearth_shared.http import CurrentPrincipal


async def _journal(request: Request) -> CommandJournal:
    journal: CommandJournal = request.app.state.journal
    return journal


async def _registry(request: Request) -> RegistryView:
    registry: RegistryView = request.app.state.registry
    return registry


async def _settings(request: Request) -> CommandApiSettings:
    settings: CommandApiSettings = request.app.state.settings
    return settings


Journal = Annotated[CommandJournal, Depends(_journal)]
Registry = Annotated[RegistryView, Depends(_registry)]
Settings = Annotated[CommandApiSettings, Depends(_settings)]


def require_home(principal: Principal, home_id: str) -> None:
    """403 unless the token may change ``home_id`` (its own home, or an admin token)."""
    if not principal.may_see(home_id):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"this token may not change home {home_id}")


__all__ = ["CurrentPrincipal", "Journal", "Registry", "Settings", "require_home"]
