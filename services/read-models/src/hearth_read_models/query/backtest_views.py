"""``POST /v1/automations/{id}/backtest`` {``from``, ``to``}: how often the automation would have fired
over that stretch of the journal, acting on nothing (it only reads).

The journal's partitions are read from the offsets Kafka gives for ``from`` (``offsets_for_times``, by
record timestamp, ``record_ms``) up to the ones for ``to`` (or their ends), with a consumer of this
request's own (no group, no commit). The home's facts are put in ``REPLAY_ORDER`` (a home's devices are
spread over partitions; each device's facts stay in version order) and replayed through the trigger and
conditions (``hearth_shared.domain.automation_replay``, which says what this and the Spark job for long
stretches, ``hearth_analytics.jobs.automation_backtest``, agree on). Stretches are bounded by ``MAX_FACTS``
read: an answer that stopped there says ``complete: false`` (``hearth automation backtest`` then runs
the Spark job). ``fired_by_hour`` counts every run by the UTC hour of its trigger fact (``fired_at``
lists the first 100).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Annotated, Any

import msgspec
from aiokafka import AIOKafkaConsumer
from fastapi import APIRouter, Path, Request
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from hearth_shared.adapters.kafka import topic_partitions
from hearth_shared.domain.automation_replay import (
    REPLAY_ORDER,
    backtest,
    in_stretch,
    record_ms,
    replayed,
)
from hearth_shared.domain.home_view import HomesView
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import Event, MalformedRecord
from hearth_shared.web.http import CurrentPrincipal, not_found
from hearth_shared.web.http_errors import error_responses, unprocessable

router = APIRouter(prefix="/v1")
MAX_FACTS = 2_000_000
MAX_STRETCH = timedelta(days=366)


class BacktestBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: AwareDatetime = Field(alias="from")
    to: AwareDatetime


async def read_stretch(
    bootstrap: str, topic: str, home_id: str, start: datetime, end: datetime
) -> tuple[list[Event], bool]:
    """The home's facts of the stretch in ``REPLAY_ORDER``, and whether every record of it was read."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, topic)
        consumer.assign(tps)
        starts = await consumer.offsets_for_times(dict.fromkeys(tps, record_ms(start)))
        stops = await consumer.offsets_for_times(dict.fromkeys(tps, record_ms(end)))
        ends = await consumer.end_offsets(tps)
        ranges = {}
        for tp in tps:
            first = starts[tp].offset if starts[tp] is not None else ends[tp]
            stop = stops[tp].offset if stops[tp] is not None else ends[tp]
            if first < stop:
                ranges[tp] = (first, stop)
                consumer.seek(tp, first)
        found: list[Event] = []
        read = 0
        while ranges and read < MAX_FACTS:
            batches = await consumer.getmany(*ranges, timeout_ms=500, max_records=5000)
            for tp, records in batches.items():
                stop = ranges[tp][1]
                for record in records:
                    if record.offset >= stop:
                        break
                    read += 1
                    try:
                        event = decode_fact(record.value)
                    except MalformedRecord:
                        continue
                    if in_stretch(event, home_id, start, end):
                        found.append(event)
                if records and (records[-1].offset + 1 >= stop):
                    del ranges[tp]
                    consumer.pause(tp)
        found.sort(key=attrgetter(*REPLAY_ORDER))
        return found, not ranges
    finally:
        await consumer.stop()


@router.post(
    "/automations/{automation_id}/backtest",
    summary="How often the automation would have fired over a stretch of the journal (acts on nothing)",
    responses=error_responses(400, 401, 404, 413),  # 400: a body that cannot be read at all
)
async def backtest_automation(
    automation_id: Annotated[uuid.UUID, Path()],
    body: BacktestBody,
    principal: CurrentPrincipal,
    request: Request,
) -> dict[str, Any]:
    view: HomesView = request.app.state.homes
    state = view.automations.get(automation_id)
    if state is None or not principal.may_see(state.definition.home_id):
        raise not_found(f"automation {automation_id}")
    if body.to <= body.from_:
        raise unprocessable(("body", "to"), "empty_stretch", "to must be after from")
    if body.to - body.from_ > MAX_STRETCH:
        raise unprocessable(("body", "to"), "stretch_too_long", f"at most {MAX_STRETCH.days} days at once")
    stack = request.app.state.settings.stack
    found, complete = await read_stretch(
        stack.kafka_bootstrap_servers, stack.topics.journal, state.definition.home_id, body.from_, body.to
    )
    home_id = state.definition.home_id
    result = backtest(state.definition, map(replayed, found), body.from_, body.to, view.timezone(home_id))
    return {
        "automation_id": str(automation_id),
        "from": body.from_.isoformat(),
        "to": body.to.isoformat(),
        **msgspec.to_builtins(result),  # facts, triggered, fired, fired_at, fired_by_hour
        "complete": complete,
    }
