"""``GET /v1/devices/{device_id}/schedule`` (and a home's at once, ``GET /v1/homes/{home_id}/schedules``,
for the live page): a device's program, its hold, the last transition fired (and the latest firing of a
preheat entry: how early it started and why, ``last_preheat``) and the coming ones (``next``: local
time, UTC offset, command), computed in the home's zone with the very functions the scheduler decides
with (``hearth_shared.domain.schedule``).

The home journal is small beside the device journal (settings and decisions, not telemetry), so each
query-API process folds it in memory (``HomesView``) and follows it. It keeps live state only (zones,
notification settings, schedules, automations' definitions and switches): no runs, deliveries or unsent
notifications, which grow with history and are read from PostgreSQL instead (``automation_runs``,
``notification_outcomes``, projected from the home journal: ``automation_views``). The router's lifespan
runs the feed. It restarts from a snapshot of that view (``query-api-homes`` on the snapshots topic,
shared by every query-API process: they fold the same topic alike; one saved by a release that kept runs
loads, without them) and reads only the home journal after it, so neither its start nor its memory grows
with the journal's age, and a retention window that passed the journal's head loses nothing the snapshot
holds. ``/healthz`` answers 503 until the feed caught up, and shows what its
last start read (``followers``). A device that has no schedule, or one of another home, is a 404 alike.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Query, Request

from hearth_read_models.query.query_params import DeviceId
from hearth_shared.adapters.topic_follower import TopicFollower, snapshot_policy
from hearth_shared.domain.home_facts import decode_home_fact
from hearth_shared.domain.home_view import HomesView
from hearth_shared.domain.schedule import Transition, upcoming, zone
from hearth_shared.domain.schedule_hold import DeviceSchedule, LastPreheat
from hearth_shared.schema.events import MalformedRecord, utcnow
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.web.http import CurrentPrincipal, not_found
from hearth_shared.web.http_errors import error_responses

log = logging.getLogger(__name__)

HOMES_SNAPSHOT = "query-api-homes"  # the snapshot's name, and the feed's (logs, restart report)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    stack = app.state.settings.stack
    view = app.state.homes = HomesView(runs_kept=0, deliveries_kept=0, tracks_unsent=False)

    async def fold(topic: str, partition: int, offset: int, value: bytes | None) -> None:
        try:
            view.apply(decode_home_fact(value))
        except MalformedRecord as error:
            log.warning("schedule view skips %s[%d]@%d: %s", topic, partition, offset, error)

    feed = app.state.homes_feed = TopicFollower(
        stack.kafka_bootstrap_servers, [stack.topics.home_journal], fold, HOMES_SNAPSHOT,
        snapshots=snapshot_policy(stack, HOMES_SNAPSHOT, view),
    )  # fmt: skip
    await feed.start()
    try:
        yield
    finally:
        await feed.stop()


router = APIRouter(prefix="/v1", lifespan=_lifespan)

Count = Annotated[int, Query(ge=1, le=50, description="How many coming transitions")]


def transition_json(t: Transition) -> dict[str, Any]:
    offset = t.local.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    sign = "+" if minutes >= 0 else "-"
    return {
        "at": t.instant.isoformat().replace("+00:00", "Z"),
        "local": t.local.replace(tzinfo=None).isoformat(timespec="seconds"),
        "utc_offset": f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}",
        "weekday": t.local.strftime("%a").lower(),
        "command": {"name": t.command.name, "params": t.command.params},
    }


@router.get(
    "/devices/{device_id}/schedule",
    summary="A device's program, its hold, and the coming transitions in the home's zone",
    responses=error_responses(401, 404, 413),
)
async def get_schedule(
    device_id: DeviceId, principal: CurrentPrincipal, request: Request, count: Count = 5
) -> dict[str, Any]:
    view: HomesView = request.app.state.homes
    state = view.schedules.get(device_id)
    if state is None or not principal.may_see(state.home_id):
        raise not_found(f"schedule of device {device_id}")
    return schedule_json(state, utcnow(), count)


@router.get(
    "/homes/{home_id}/schedules",
    summary="Every scheduled device of a home (by device_id): program, hold, coming transitions",
    description="What the live page shows under each device; a device with no schedule is not listed.",
    responses=error_responses(401, 404, 413),
)
async def list_home_schedules(
    home_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN)],
    principal: CurrentPrincipal,
    request: Request,
    count: Count = 3,
) -> dict[str, Any]:
    if not principal.may_see(home_id):
        raise not_found(f"home {home_id}")
    view: HomesView = request.app.state.homes
    now = utcnow()
    found = sorted((s for s in view.schedules.values() if s.home_id == home_id), key=lambda s: s.device_id)
    return {"schedules": [schedule_json(s, now, count) for s in found if s.program or s.hold_until]}


def schedule_json(state: DeviceSchedule, now: datetime, count: int) -> dict[str, Any]:
    """A device's schedule as the API shows it, with its next ``count`` transitions after ``now``."""
    coming = upcoming(list(state.program), zone(state.timezone), now, count) if state.program else []
    return {
        "device_id": state.device_id,
        "home_id": state.home_id,
        "timezone": state.timezone,
        "program": [
            {
                "days": list(e.days),
                "at": e.at,
                "command": {"name": e.command.name, "params": e.command.params},
                **({"preheat": True} if e.preheat else {}),
            }
            for e in state.program
        ],
        "hold": None
        if state.hold_until is None
        else {"until": state.hold_until.isoformat(), "command_id": str(state.held_by)},
        "last_fired_at": state.last_fired.isoformat() if state.last_fired else None,
        "last_preheat": None if state.last_preheat is None else last_preheat_json(state.last_preheat),
        "preheat_max_min": None if state.preheat_max_s is None else state.preheat_max_s // 60,
        "next": [transition_json(t) for t in coming],
    }


def last_preheat_json(last: LastPreheat) -> dict[str, Any]:
    """The latest firing of a preheat entry: which entry, its programmed time, how early and why (at the
    cap: the lead the room needed, or the temperature it levels off at below the target)."""
    return {
        "entry": last.entry,
        "at": last.instant.isoformat().replace("+00:00", "Z"),
        "lead_s": last.preheat.lead_s,
        "reason": last.preheat.reason,
        "needed_s": last.preheat.needed_s,
        "reachable_c": last.preheat.reachable_c,
    }
