"""``GET /v1/device-types``: every device type's schema, as its module declares it (state keys with
their JSON types and ranges, commands with a params schema, the telemetry rolled up), and the admin
commands every type takes (``admin_commands``; only admin tokens may send them). The live page draws
each device's readings and controls from it, so the page names no device type of its own."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from hearth_shared.domain.admin import admin_command_schemas
from hearth_shared.domain.registry import device_type_schemas
from hearth_shared.web.http import CurrentPrincipal
from hearth_shared.web.http_errors import error_responses

router = APIRouter(prefix="/v1")


@router.get(
    "/device-types",
    summary="Every device type's state keys, commands and params (JSON schema), and rollups",
    responses=error_responses(401, 413),
)
async def list_device_types(principal: CurrentPrincipal) -> dict[str, Any]:  # a token is needed
    return {"items": device_type_schemas(), "admin_commands": admin_command_schemas()}
