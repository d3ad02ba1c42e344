"""The projection's fold against the domain's: a stream of realistic facts (state reports, commands run to
convergence, anomalies, connectivity) folded by ``Projection.apply`` gives the twins ``evolve`` gives,
one history row per fact, every command at its last status and one alert per anomaly; facts with
nothing to project beyond twin and history (state reports) change no command or alert."""

from __future__ import annotations

import itertools
import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hearth_devstack.workload.journal_facts import JournalFacts
from hearth_read_models.projection.rules import Projection
from hearth_shared.domain import Twin, decide, evolve, stamp
from hearth_shared.schema.events import (
    AnomalyDetected,
    CommandConverged,
    CommandRequested,
    Event,
    Inbound,
    RegisterDevice,
    ReportState,
    StateReported,
    decode_event,
    encode,
)

pytestmark = pytest.mark.unit


def _facts(count: int) -> list[tuple[Event, bytes]]:
    facts = itertools.islice(iter(JournalFacts(4, seed=11, prefix="fold")), count)
    return [(decode_event(wire), wire) for wire in map(encode, facts)]


@pytest.mark.parametrize("collect_changes", [True, False])
def test_the_projection_folds_as_the_domain_does(collect_changes: bool) -> None:
    """In batches over the same caches, as the projector folds them (without ``collect_changes`` a
    device's state reports are held back and folded at once: the same twins)."""
    facts = _facts(3000)
    cached_twins: dict[str, Twin] = {}
    commands: dict[Any, dict[str, Any]] = {}
    twins: dict[str, Twin] = {}
    history, alerts = [], 0
    for start in range(0, len(facts), 250):
        projection = Projection(cached_twins, commands, collect_changes=collect_changes)
        for event, wire in facts[start : start + 250]:
            projection.apply(event, wire)
            twins[event.device_id] = evolve(twins.get(event.device_id), event)
        projection.settle()
        history += projection.history
        alerts += len(projection.alerts)
    kinds = Counter(type(event) for event, _ in facts)
    assert kinds[CommandRequested] > 0 and kinds[AnomalyDetected] > 0  # the stream has what is checked
    assert cached_twins == twins
    assert [(row.device_id, row.version) for row in history] == [(e.device_id, e.version) for e, _ in facts]
    assert [row.event for row in history] == [wire for _, wire in facts]
    assert {row.type for row in history} == {e.type for e, _ in facts}
    statuses = Counter(c["status"] for c in commands.values())
    assert statuses == {"converged": kinds[CommandConverged]}
    assert alerts == kinds[AnomalyDetected]
    again = Projection(cached_twins, commands, collect_changes=collect_changes)  # a batch read twice
    for event, wire in facts[-250:]:
        again.apply(event, wire)
    again.settle()
    assert (again.skipped, again.history, cached_twins) == (250, [], twins)


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


def test_reports_out_of_order_fold_held_as_the_domain_does() -> None:
    """Reports that come after newer ones (recording only the keys no newer one carried) and reports
    naming keys carried unchanged: the facts decide makes of them fold into the same twin held as by
    ``evolve``, ``older_key_seqs`` and all."""
    rng = random.Random(5)
    keys: dict[str, list[Any]] = {
        "ambient_c": [19.0, 19.5, 20.0], "target_c": [20.0, 21.0], "hvac_mode": ["heat", "off"]
    }  # fmt: skip
    start = datetime(2026, 11, 29, tzinfo=UTC)
    register = RegisterDevice(
        request_id=uuid.uuid4(), device_id="t1", sent_at=start, home_id="h1", device_type="thermostat",
        name="Hall",
    )  # fmt: skip
    twin: Twin | None = None
    facts: list[Event] = []
    requests: list[Inbound] = [register]
    sent: list[tuple[int, dict[str, Any]]] = [
        (seq, {k: rng.choice(v) for k, v in keys.items() if rng.random() < 0.6}) for seq in range(60)
    ]
    for i in range(0, len(sent) - 1, 2):
        if rng.random() < 0.4:
            sent[i], sent[i + 1] = sent[i + 1], sent[i]  # the older second
    sent += rng.sample(sent, 6)  # and some twice
    for seq, state in sent:
        at = start + timedelta(seconds=seq)
        requests.append(
            ReportState(request_id=uuid.uuid4(), device_id="t1", sent_at=at, device_seq=seq, device_time=at,
                        state=state)
        )  # fmt: skip
    for request in requests:
        now = start + timedelta(seconds=len(facts))
        events = stamp(twin, decide(twin, request, now), home_id="h1", device_id="t1", now=now,
                       causation_id=request.request_id)  # fmt: skip
        for event in events:
            twin = evolve(twin, event)
        facts += events
    seqs = [e.payload.device_seq for e in facts if isinstance(e, StateReported)]
    assert any(seq < max(seqs[:i]) for i, seq in enumerate(seqs) if i)  # some recorded after a newer one
    assert any(e.payload.unchanged for e in facts if isinstance(e, StateReported))
    for batch in (5, 50):
        twins: dict[str, Twin] = {}
        for begin in range(0, len(facts), batch):
            projection = Projection(twins, {}, collect_changes=False)
            for event in facts[begin : begin + batch]:
                projection.apply(event, encode(event))
            projection.settle()
        assert twins["t1"] == twin
