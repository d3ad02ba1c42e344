"""FastAPI dependencies of the command API, as ``Annotated`` aliases.

All ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop per
dependency per request for what is an attribute lookup.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from hearth_command_api.service.device_book import DeviceBook
from hearth_command_api.service.ports import TopicWriter
from hearth_command_api.settings import CommandApiSettings
from hearth_shared.schema.auth import Principal
from hearth_shared.web.http import CurrentPrincipal


async def _writer(request: Request) -> TopicWriter:
    writer: TopicWriter = request.app.state.writer
    return writer


async def _book(request: Request) -> DeviceBook:
    book: DeviceBook = request.app.state.book
    return book


async def _settings(request: Request) -> CommandApiSettings:
    settings: CommandApiSettings = request.app.state.settings
    return settings


Writer = Annotated[TopicWriter, Depends(_writer)]
Book = Annotated[DeviceBook, Depends(_book)]
Settings = Annotated[CommandApiSettings, Depends(_settings)]


def require_home(principal: Principal, home_id: str) -> None:
    """403 unless the token may change ``home_id`` (its own home, or an admin token)."""
    if not principal.may_see(home_id):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"this token may not change home {home_id}")


__all__ = ["Book", "CurrentPrincipal", "Settings", "Writer", "require_home"]
