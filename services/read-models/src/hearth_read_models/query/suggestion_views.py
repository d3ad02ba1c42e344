"""Reads of suggested programs: ``GET /v1/devices/{device_id}/schedule/suggestions`` (the device's kept
suggestions, open or decided, newest first) and ``GET /v1/homes/{home_id}/schedule/suggestions`` (the
open ones of every device of the home: what a household has to decide on).

Suggestions are live state from the home journal folded in memory (``app.state.homes``, the
``HomesView`` that ``schedule_views``' lifespan keeps; this router must be included with it): the newest
``schedule.suggested`` of a device is its open one, and the latest decided ones are kept
(``SUGGESTIONS_KEPT``). Each shows its program in the schedule's format, its evidence (weeks, changes,
regularity, per entry), its status and when it was made and decided. Another home's device is a 404 alike
one with no suggestion; an empty list is a 200.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Path, Request

from hearth_read_models.query.query_params import DeviceId
from hearth_shared.domain.home_view import HomesView, SuggestionState
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http import CurrentPrincipal, not_found
from hearth_shared.web.http_errors import error_responses

router = APIRouter(prefix="/v1")


def _view(request: Request) -> HomesView:
    view: HomesView = request.app.state.homes
    return view


def suggestion_json(kept: SuggestionState) -> dict[str, Any]:
    fact = kept.suggestion
    payload = fact.payload
    return {
        "suggestion_id": str(fact.fact_id),
        "device_id": fact.device_id,
        "home_id": fact.home_id,
        "status": kept.status,
        "created_at": fact.occurred_at.isoformat(),
        "decided_at": kept.decided_at.isoformat() if kept.decided_at else None,
        "program": [
            {
                "days": list(e.days),
                "at": e.at,
                "command": {"name": e.command.name, "params": e.command.params},
            }
            for e in payload.program
        ],
        "evidence": {
            **msgspec.to_builtins(payload.evidence),
            "entries": msgspec.to_builtins(payload.entries),
        },
    }


@router.get(
    "/devices/{device_id}/schedule/suggestions",
    summary="A device's suggested programs (open first learned last), with their evidence and status",
    description="Accept or reject one with `POST .../schedule/suggestions/{id}/accept|reject` on the "
    "command API; nothing changes a schedule without that.",
    responses=error_responses(401, 404, 413),
)
async def device_suggestions(
    device_id: DeviceId, principal: CurrentPrincipal, request: Request
) -> dict[str, Any]:
    kept = list(_view(request).suggestions.get(device_id, {}).values())
    if not kept or not principal.may_see(kept[0].suggestion.home_id):
        raise not_found(f"suggestions of device {device_id}")
    return {"device_id": device_id, "suggestions": [suggestion_json(s) for s in reversed(kept)]}


@router.get(
    "/homes/{home_id}/schedule/suggestions",
    summary="The open suggested programs of a home's devices (by device_id)",
    responses=error_responses(401, 404, 413),
)
async def home_suggestions(
    home_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN)], principal: CurrentPrincipal, request: Request
) -> dict[str, Any]:
    if not principal.may_see(home_id):
        raise not_found(f"home {home_id}")
    view = _view(request)
    found = []
    for device_id in sorted(view.suggestions):
        kept = view.open_suggestion(device_id)
        if kept is not None and kept.suggestion.home_id == home_id:
            found.append(suggestion_json(kept))
    return {"home_id": home_id, "suggestions": found}
