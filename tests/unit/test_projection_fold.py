"""The projection's fold against the domain's: a stream of realistic facts (state reports, commands run to
convergence, anomalies, connectivity) folded by ``Projection.apply`` gives the twins ``evolve`` gives,
one history row per fact, every command at its last status and one alert per anomaly; facts with
nothing to project beyond twin and history (state reports) change no command or alert."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from hearth_devstack.workload.journal_facts import JournalFacts
from hearth_read_models.projection.rules import Projection
from hearth_shared.domain import Twin, evolve
from hearth_shared.schema.events import (
    AnomalyDetected,
    CommandConverged,
    CommandRequested,
    Event,
    StateReported,
    decode_event,
    encode,
)

pytestmark = pytest.mark.unit


def _facts(count: int) -> list[tuple[Event, bytes]]:
    facts = itertools.islice(iter(JournalFacts(4, seed=11, prefix="fold")), count)
    return [(decode_event(wire), wire) for wire in map(encode, facts)]


def test_the_projection_folds_as_the_domain_does() -> None:
    facts = _facts(3000)
    projection = Projection({}, {}, collect_changes=False)
    twins: dict[str, Twin] = {}
    for event, wire in facts:
        projection.apply(event, wire)
        twins[event.device_id] = evolve(twins.get(event.device_id), event)
    kinds = Counter(type(event) for event, _ in facts)
    assert kinds[CommandRequested] > 0 and kinds[AnomalyDetected] > 0  # the stream has what is checked
    assert projection.twins == twins
    assert [(row.device_id, row.version) for row in projection.history] == [
        (e.device_id, e.version) for e, _ in facts
    ]
    assert [row.event for row in projection.history] == [wire for _, wire in facts]
    statuses = Counter(c["status"] for c in projection.commands.values())
    assert statuses == {"converged": kinds[CommandConverged]}
    assert len(projection.alerts) == kinds[AnomalyDetected]


def test_a_state_report_moves_only_its_twin_and_history() -> None:
    facts = _facts(200)
    projection = Projection({}, {}, collect_changes=False)
    for event, wire in facts:
        projection.apply(event, wire)
    commands, alerts = dict(projection.commands), len(projection.alerts)
    reports = [(e, w) for e, w in _facts(400)[200:] if isinstance(e, StateReported)]
    for event, wire in reports:
        projection.apply(event, wire)
    assert reports and projection.commands == commands and len(projection.alerts) == alerts
    assert len(projection.history) == 200 + len(reports)
