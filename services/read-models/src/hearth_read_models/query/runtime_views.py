"""The runtime report (issue 22 point 4): ``GET /v1/devices/{device_id}/runtime?from=&to=`` (a thermostat's
days) and ``GET /v1/homes/{home_id}/runtime?from=&to=`` (each of the home's thermostats per day, and the
home's own day totals).

The figures are the Spark batch's (``hearth analytics runtime``), published as records of the window
``day`` on the rollups topic and projected into the ``rollups`` table like every rollup
(``hearth_shared.schema.runtime_records`` says what each figure means). A day is the home's local date:
its record's ``window_start`` is that date at 00:00 UTC (a label, so a rewrite of the day replaces it),
which is what ``from`` and ``to`` (local dates, both included) select. Without them the answer holds the
30 days up to today (UTC); at most ``MAX_DAYS`` at once. Oldest day first, then by device; a day the
batch has not reported is absent, not zero. Another home's device or home is a 404, like one that does
not exist.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from sqlalchemy import Select, select

from hearth_read_models.query.query_params import DeviceId
from hearth_read_models.query.reads import visible_twin
from hearth_read_models.store import tables as t
from hearth_shared.schema.ids import IDENTIFIER_PATTERN
from hearth_shared.schema.runtime_records import FIGURES, RUNTIME_WINDOW
from hearth_shared.web.http import CurrentPrincipal, not_found
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1")

DEFAULT_DAYS = 30
MAX_DAYS = 366

From = Annotated[date | None, Query(alias="from", description="The first local day (YYYY-MM-DD), included")]
To = Annotated[date | None, Query(description="The last local day (YYYY-MM-DD), included; default today")]

FIGURES_TEXT = (
    "Each day: `day` (the home's local date), `time_zone`, `day_start`, `day_end`, `covered_min` (minutes "
    "with reports), `heating_min`, `cooling_min`, `hdd` (heating degree-days, base 18 °C, from the "
    "thermostat's outdoor temperature), `heating_min_per_hdd` (null below 0.5 degree-days), "
    "`outdoor_mean_c`, `manual_changes` (targets set by hand at the panel), `holds` (schedule holds "
    "started), `hold_min`, `away_min` (the target left below 18 °C for a day or more)."
)


def _days(start: date | None, end: date | None) -> tuple[date, date]:
    end = end or datetime.now(UTC).date()
    if start is None:
        start = end - timedelta(days=DEFAULT_DAYS - 1) if end.toordinal() > DEFAULT_DAYS else date.min
    if start > end:
        raise unprocessable(("query", "from"), "value_error", f"from {start} is after to {end}")
    if (end - start).days >= MAX_DAYS:
        raise unprocessable(("query", "from"), "value_error", f"at most {MAX_DAYS} days at once")
    return start, end


def _runtime_rows(scope: str, start: date, end: date) -> Select[Any]:
    rollups = t.rollups
    return (
        select(rollups.c.subject_id, rollups.c.value)
        .where(
            rollups.c.scope == scope,
            rollups.c.window == RUNTIME_WINDOW,
            rollups.c.window_start >= datetime.combine(start, time(), UTC),
            rollups.c.window_start <= datetime.combine(end, time(), UTC),  # a day's label is its 00:00 UTC
        )
        .order_by(rollups.c.window_start, rollups.c.subject_id)
    )


def _figures(value: dict[str, Any]) -> dict[str, Any]:
    return {name: value.get(name) for name in FIGURES}


@router.get(
    "/devices/{device_id}/runtime",
    summary="A thermostat's runtime per day of its home: heating and cooling minutes, degree-days, and what "
    "changed them",
    description=f"`items`: one per day the runtime batch reported, oldest first. {FIGURES_TEXT}",
    responses=error_responses(401, 404, 413),
)
async def device_runtime(
    device_id: DeviceId,
    principal: CurrentPrincipal,
    request: Request,
    from_: From = None,
    to: To = None,
) -> dict[str, Any]:
    start, end = _days(from_, to)
    twin = await visible_twin(request.app.state.engine, request.app.state.redis, principal, device_id)
    query = _runtime_rows("device", start, end).where(t.rollups.c.subject_id == device_id)
    async with request.app.state.engine.connect() as conn:
        rows = list(await conn.execute(query))
    return {
        "device_id": device_id,
        "home_id": twin["home_id"],
        "from": start.isoformat(),
        "to": end.isoformat(),
        "items": [_figures(row.value) for row in rows],
    }


@router.get(
    "/homes/{home_id}/runtime",
    summary="A home's runtime per thermostat and day, and the home's totals per day",
    description="`items`: one per thermostat and day (with its `device_id`), oldest day first; `days`: the "
    "home's own per day (minutes and counts summed over its thermostats, device-minutes; `hdd` and "
    f"`outdoor_mean_c` their mean; `devices` counted). {FIGURES_TEXT}",
    responses=error_responses(401, 404, 413),
)
async def home_runtime(
    home_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN)],
    principal: CurrentPrincipal,
    request: Request,
    from_: From = None,
    to: To = None,
) -> dict[str, Any]:
    start, end = _days(from_, to)
    if not principal.may_see(home_id):
        raise not_found(f"home {home_id}")
    devices = select(t.twins.c.device_id).where(t.twins.c.home_id == home_id)
    device_days = _runtime_rows("device", start, end).where(t.rollups.c.subject_id.in_(devices))
    home_days = _runtime_rows("home", start, end).where(t.rollups.c.subject_id == home_id)
    async with request.app.state.engine.connect() as conn:
        items = [
            {"device_id": row.subject_id, **_figures(row.value)} for row in await conn.execute(device_days)
        ]
        days = [
            {"devices": row.value.get("devices"), **_figures(row.value)}
            for row in await conn.execute(home_days)
        ]
    return {
        "home_id": home_id,
        "from": start.isoformat(),
        "to": end.isoformat(),
        "items": items,
        "days": days,
    }
