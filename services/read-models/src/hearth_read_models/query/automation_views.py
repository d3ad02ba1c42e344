"""Reads of automations: ``GET /v1/automations?home_id=``, ``GET /v1/automations/{id}/runs`` (each run's
trigger fact, conditions, actions, and each command's status from the commands view, or ``skipped``
for a command not sent, with why: a quarantined device), and
``GET /v1/homes/{home_id}/deliveries`` (notifications delivered or given up).

Automations, runs and deliveries come from the home journal folded in memory (``app.state.homes``, the
``HomesView`` that ``schedule_views``' lifespan keeps; this router must be included with it), which
keeps the latest ``RUNS_KEPT`` runs of each automation and ``DELIVERIES_KEPT`` delivery facts of each
home (the journal and the archive keep them all). A notify action shows ``sending`` while its run has
no outcome fact, the outcome's type once it has, and ``outcome_not_kept`` for one older than the
deliveries kept. Another home's automation is a 404, like one that does not exist.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Path, Query, Request
from sqlalchemy import select

from hearth_read_models.query.query_params import HomeIdFilter
from hearth_read_models.store import tables as t
from hearth_shared.domain.home_view import DELIVERIES_KEPT, RUNS_KEPT, Delivery, HomesView
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http import CurrentPrincipal, not_found
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1")


def _view(request: Request) -> HomesView:
    view: HomesView = request.app.state.homes
    return view


@router.get(
    "/automations",
    summary="A home's automations, with whether each is on or suspended (and why)",
    responses=error_responses(401, 413),
)
async def list_automations(
    principal: CurrentPrincipal, request: Request, home_id: HomeIdFilter = None
) -> dict[str, Any]:
    home = home_id or principal.home_id
    if home is None:
        raise unprocessable(("query", "home_id"), "missing", "home_id is required with an admin token")
    if not principal.may_see(home):
        return {"automations": []}
    found = [
        {**msgspec.to_builtins(s.definition), "enabled": s.enabled, "suspended": s.suspended}
        for s in _view(request).automations.values()
        if s.definition.home_id == home
    ]
    return {"automations": found}


@router.get(
    "/automations/{automation_id}/runs",
    summary="An automation's runs, newest first, with each command's status",
    description=f"The latest {RUNS_KEPT} runs at most: the query API keeps no more per automation "
    "(every run is in the home journal and the archive; the backtest counts any stretch).",
    responses=error_responses(401, 404, 413),
)
async def list_runs(
    automation_id: Annotated[uuid.UUID, Path()],
    principal: CurrentPrincipal,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=500, description=f"At most {RUNS_KEPT} are kept")] = RUNS_KEPT,
) -> dict[str, Any]:
    view = _view(request)
    state = view.automations.get(automation_id)
    if state is None or not principal.may_see(state.definition.home_id):
        raise not_found(f"automation {automation_id}")
    runs = list(reversed(view.runs.get(automation_id, {}).values()))[:limit]
    command_ids = [a.action_id for r in runs for a in r.actions if a.kind == "command"]
    statuses: dict[uuid.UUID, str] = {}
    if command_ids:
        async with request.app.state.engine.connect() as conn:
            query = select(t.commands.c.command_id, t.commands.c.status).where(
                t.commands.c.command_id.in_(command_ids)
            )
            statuses = {row.command_id: row.status for row in await conn.execute(query)}
    delivered: dict[uuid.UUID, Delivery] = dict(view.deliveries.get(state.definition.home_id) or {})
    out = []
    for run in runs:
        item = msgspec.to_builtins(run)
        for action in item["actions"]:
            key = uuid.UUID(action["action_id"])
            if action["kind"] == "command":  # not sent (a quarantined device): "skipped", and why
                action["status"] = "skipped" if action.get("skipped") else statuses.get(key, "pending")
            elif key in view.unsent:
                action["status"] = "sending"
            else:
                fact = delivered.get(key)
                action["status"] = "outcome_not_kept" if fact is None else fact.__struct_config__.tag
        out.append(item)
    return {
        "automation_id": str(automation_id),
        "enabled": state.enabled,
        "suspended": state.suspended,
        "runs": out,
    }


@router.get(
    "/homes/{home_id}/deliveries",
    summary="A home's notifications: delivered or given up, with attempts and the receiver's last status",
    description=f"The latest {DELIVERIES_KEPT} at most (the home journal keeps them all).",
    responses=error_responses(401, 404, 413),
)
async def list_deliveries(
    home_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN)], principal: CurrentPrincipal, request: Request
) -> dict[str, Any]:
    if not principal.may_see(home_id):
        raise not_found(f"home {home_id}")
    facts = list((_view(request).deliveries.get(home_id) or {}).values())
    return {
        "deliveries": [
            {
                "outcome": f.__struct_config__.tag,
                "at": f.occurred_at.isoformat(),
                **msgspec.to_builtins(getattr(f, "payload", None)),
            }
            for f in facts
        ]
    }
