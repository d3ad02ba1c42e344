"""Reads of automations: ``GET /v1/automations?home_id=``, ``GET /v1/automations/{id}/runs`` (each run's
trigger fact, conditions, actions, and each command's status from the commands view, or ``skipped``
for a command not sent, with why: a quarantined device), and
``GET /v1/homes/{home_id}/deliveries`` (notifications delivered or given up).

Automations (definitions, on or off, suspended) are live state: they come from the home journal folded in
memory (``app.state.homes``, the ``HomesView`` that ``schedule_views``' lifespan keeps; this router must be
included with it). Runs and delivery outcomes are history: the projector writes every one of them to
PostgreSQL (``automation_runs``, ``notification_outcomes``) with its home-journal positions, and they are
read there, so the query API's memory does not grow with them (issue 20). The two paths lag on their
own: an answer may show an automation suspended before the projector wrote the run that came before the
suspension (a moment later it has both).

Both lists are newest first (in home-journal order: a home's facts share a partition) and paged like the
other lists: ``limit`` (runs: 20 by default, up to 500; deliveries: 100, up to 500) and ``after`` (the
``next_after`` of the page before; ``null`` on the last page). The answers keep their shape, with
``next_after`` added (deliveries were oldest first when the latest 100 were all there was). A notify
action shows ``sending`` while there is no outcome for it yet, and the outcome's type once there is (every
outcome is kept, so the former ``outcome_not_kept`` no longer happens). Another home's automation is a
404, like one that does not exist.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Path, Query, Request
from sqlalchemy import select, tuple_

from hearth_read_models.query.query_params import (
    Cursor,
    HomeIdFilter,
    cursor_position,
    cursor_uuid,
    decode_cursor,
    encode_cursor,
)
from hearth_read_models.store import tables as t
from hearth_shared.domain.home_view import HomesView
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http import CurrentPrincipal, not_found
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1")

RUNS_PAGE = 20  # runs per page by default (the live page shows 3)
DELIVERIES_PAGE = 100  # deliveries per page by default
PageLimit = Query(ge=1, le=500, description="Items per page")


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
    summary="An automation's runs, newest first, with each command's and notification's status",
    description="Every run is kept; a page holds `limit` of them, `next_after` leads to older ones.",
    responses=error_responses(401, 404, 413),
)
async def list_runs(
    automation_id: Annotated[uuid.UUID, Path()],
    principal: CurrentPrincipal,
    request: Request,
    limit: Annotated[int, PageLimit] = RUNS_PAGE,
    after: Cursor = None,
) -> dict[str, Any]:
    state = _view(request).automations.get(automation_id)
    if state is None or not principal.may_see(state.definition.home_id):
        raise not_found(f"automation {automation_id}")
    runs = t.automation_runs
    query = select(runs.c.run_id, runs.c.journal_offset, runs.c.run).where(
        runs.c.automation_id == automation_id, runs.c.home_id == state.definition.home_id
    )
    if after:
        position, run_id = decode_cursor(after, 2)
        query = query.where(
            tuple_(runs.c.journal_offset, runs.c.run_id) < (cursor_position(position), cursor_uuid(run_id))
        )
    query = query.order_by(runs.c.journal_offset.desc(), runs.c.run_id.desc()).limit(limit)
    async with request.app.state.engine.connect() as conn:
        rows = list(await conn.execute(query))
        found: list[dict[str, Any]] = [row.run for row in rows]  # JSON, decoded by the driver
        commands, notifications = _action_ids(found)
        statuses: dict[str, str] = {}
        if commands:
            query = select(t.commands.c.command_id, t.commands.c.status).where(
                t.commands.c.command_id.in_(commands)
            )
            statuses |= {str(row.command_id): row.status for row in await conn.execute(query)}
        if notifications:
            outcomes = t.notification_outcomes
            query = select(outcomes.c.notification_id, outcomes.c.outcome).where(
                outcomes.c.notification_id.in_(notifications)
            )
            statuses |= {str(row.notification_id): row.outcome for row in await conn.execute(query)}
    for run in found:
        for action in run["actions"]:
            if action["kind"] == "command":  # not sent (a quarantined device): "skipped", and why
                action["status"] = (
                    "skipped" if action.get("skipped") else statuses.get(action["action_id"], "pending")
                )
            else:
                action["status"] = statuses.get(action["action_id"], "sending")
    last = rows[-1] if len(rows) == limit else None
    return {
        "automation_id": str(automation_id),
        "enabled": state.enabled,
        "suspended": state.suspended,
        "runs": found,
        "next_after": None if last is None else encode_cursor(last.journal_offset, last.run_id),
    }


def _action_ids(runs: list[dict[str, Any]]) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """The ids of the runs' sent commands and of their notifications."""
    actions = [a for run in runs for a in run["actions"]]
    commands = [uuid.UUID(a["action_id"]) for a in actions if a["kind"] == "command" and not a.get("skipped")]
    notifications = [uuid.UUID(a["action_id"]) for a in actions if a["kind"] == "notify"]
    return commands, notifications


@router.get(
    "/homes/{home_id}/deliveries",
    summary="A home's notifications, newest first: delivered or given up, with attempts and the receiver's "
    "last status",
    description="Every outcome is kept; a page holds `limit` of them, `next_after` leads to older ones.",
    responses=error_responses(401, 404, 413),
)
async def list_deliveries(
    home_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN)],
    principal: CurrentPrincipal,
    request: Request,
    limit: Annotated[int, PageLimit] = DELIVERIES_PAGE,
    after: Cursor = None,
) -> dict[str, Any]:
    if not principal.may_see(home_id):
        raise not_found(f"home {home_id}")
    outcomes = t.notification_outcomes
    query = select(
        outcomes.c.notification_id,
        outcomes.c.outcome,
        outcomes.c.at,
        outcomes.c.journal_offset,
        outcomes.c.payload,
    ).where(outcomes.c.home_id == home_id)
    if after:
        position, notification_id = decode_cursor(after, 2)
        query = query.where(
            tuple_(outcomes.c.journal_offset, outcomes.c.notification_id)
            < (cursor_position(position), cursor_uuid(notification_id))
        )
    query = query.order_by(outcomes.c.journal_offset.desc(), outcomes.c.notification_id.desc()).limit(limit)
    async with request.app.state.engine.connect() as conn:
        rows = list(await conn.execute(query))
    last = rows[-1] if len(rows) == limit else None
    return {
        "deliveries": [{"outcome": row.outcome, "at": row.at.isoformat(), **row.payload} for row in rows],
        "next_after": None if last is None else encode_cursor(last.journal_offset, last.notification_id),
    }
