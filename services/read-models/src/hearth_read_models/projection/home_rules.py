"""The projection of the home journal: ``automation.ran`` -> an ``automation_runs`` row,
``notification.delivered`` / ``notification.gave_up`` -> a ``notification_outcomes`` row; every other home
fact (settings, schedules, automations' definitions: live state the query API folds in memory) projects
nothing. Pure: a record in, a row (or None) out.

Runs and outcomes are history, so they live in PostgreSQL, not in the query API's memory (issue 20): the
projector writes them with its consumed offsets in one transaction, like the device journal's views.

Keys make a replay harmless: a run is its ``run_id`` and never changes (the first row of a run recorded
twice stays: ``RunRows.add``); an outcome is its ``notification_id``, the latest outcome fact wins. Each
row keeps the home journal position it came from (``journal_partition``, ``journal_offset``): a home's facts
are all in one partition, so the offset orders a home's runs and outcomes as the journal does (newest
first in the API), and a rebuild knows which rows the topic no longer holds (``rebuild.home_carry``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

import msgspec

from hearth_shared.domain.home_facts import (
    AutomationRan,
    HomeFact,
    NotificationDelivered,
    NotificationGaveUp,
    decode_home_fact,
)
from hearth_shared.schema.events import MalformedRecord
from hearth_shared.schema.ids import find_unstorable

_json = msgspec.json.Encoder()


class RunRow(NamedTuple):
    """An automation_runs row: the run (``RunPayload``) as JSON text, as the API serves it."""

    run_id: uuid.UUID
    automation_id: uuid.UUID
    home_id: str
    ran_at: datetime
    journal_partition: int
    journal_offset: int
    run: str


class OutcomeRow(NamedTuple):
    """A notification_outcomes row: ``outcome`` is the fact's type; ``payload`` its payload as JSON text
    (attempts, the receiver's last status, the error)."""

    notification_id: uuid.UUID
    home_id: str
    outcome: str
    at: datetime
    journal_partition: int
    journal_offset: int
    payload: str


RUN_COLUMNS = RunRow._fields
OUTCOME_COLUMNS = OutcomeRow._fields


@dataclass
class HomeRows:
    """A batch's rows from the home journal, by key (one row per key: a statement writes each once)."""

    runs: dict[uuid.UUID, RunRow] = field(default_factory=dict)
    outcomes: dict[uuid.UUID, OutcomeRow] = field(default_factory=dict)

    def add(self, row: RunRow | OutcomeRow | None) -> None:
        if isinstance(row, RunRow):
            self.runs.setdefault(row.run_id, row)  # a run never changes: its first record stays
        elif isinstance(row, OutcomeRow):
            self.outcomes[row.notification_id] = row  # the latest outcome wins


def home_row(value: bytes | None, partition: int, offset: int) -> RunRow | OutcomeRow | None:
    """The row of one home-journal record (None: a fact with nothing to project); ``MalformedRecord``
    for a record that is not a home fact, or one PostgreSQL could not store."""
    fact = decode_home_fact(value)
    if not isinstance(fact, AutomationRan | NotificationDelivered | NotificationGaveUp):
        return None
    _check_storable(fact)
    payload = _json.encode(fact.payload).decode()
    if isinstance(fact, AutomationRan):
        run = fact.payload
        return RunRow(
            run.run_id, run.automation_id, fact.home_id, fact.occurred_at, partition, offset, payload
        )
    outcome = fact.__struct_config__.tag
    assert isinstance(outcome, str)
    return OutcomeRow(
        fact.payload.notification_id, fact.home_id, outcome, fact.occurred_at, partition, offset, payload
    )


def _check_storable(fact: HomeFact) -> None:
    where = find_unstorable(msgspec.to_builtins(fact))
    if where is not None:
        raise MalformedRecord("unstorable_home_fact", f"{where} cannot be stored (NUL, control character)")
