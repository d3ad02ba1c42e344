"""Guard: every device type is whole, wherever it is used.

For each registered type: its facts (a registration, every command in every form, a state report) are
decoded and taken in by every consumer (the journal codec and its storable checks, ``evolve``, the read
models' projection, the command API's book, the gateway's edge), its settings each get recorded,
the simulator has a model for it whose state is what the type declares and which carries out its
commands until they converge, and the analytics read every key it rolls up. A new type that misses
any of it fails here, not in a running stack.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any

import pytest

from hearth_analytics.sources.schema import REPORTED
from hearth_command_api.service.device_book import DeviceBook
from hearth_device_gateway.service.edge import to_request
from hearth_read_models.projection.rules import Projection
from hearth_shared.domain import Twin, decide, evolve, stamp
from hearth_shared.domain.device_type import Command, DeviceType, Param
from hearth_shared.domain.registry import DEVICE_TYPES, device_type_schemas
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.events import (
    DesiredSetPayload,
    Event,
    RegisterDevice,
    ReportAvailability,
    ReportState,
    SubmitCommand,
    encode,
    fact_type,
)
from hearth_shared.schema.mqtt import StateMessage, encode_message, state_topic
from hearth_simulator.fleet import FleetOptions
from hearth_simulator.models import SIM_MODELS
from hearth_simulator.registration import demo_counts

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)
TYPES = sorted(DEVICE_TYPES)


def sample(param: Param, index: int) -> Any:
    """A valid value for ``param`` (the ``index``-th of its form: a low/high pair gets two values)."""
    value = param.value
    if value.values:
        return value.values[0]
    if value.type == "boolean":
        return True
    if value.type == "string":
        return "x"
    low = value.minimum if value.minimum is not None else 0.0
    return low + index * (value.step or 1)


def samples(command: Command) -> list[dict[str, Any]]:
    """One params object per form of the command: every param given (optional ones too), and for a form
    with optional params also none of them."""
    found = []
    for form in command.forms:
        found.append({p.name: sample(p, i) for i, p in enumerate(form)})
        if any(not p.required for p in form):
            found.append({p.name: sample(p, i) for i, p in enumerate(form) if p.required})
    return found


class Device:
    """A device of one type, its facts fed through every consumer as they are recorded."""

    def __init__(self, kind: DeviceType) -> None:
        self.kind = kind
        self.twin: Twin | None = None
        self.facts: list[Event] = []
        self.projection = Projection(twins={}, commands={})
        self.book = DeviceBook()
        self.seq = 0
        self.request(RegisterDevice(request_id=uuid.uuid4(), device_id="d1", sent_at=NOW, home_id="h1",
                                    device_type=kind.name, name="Guard", simulated=True))  # fmt: skip
        self.request(ReportAvailability(request_id=uuid.uuid4(), device_id="d1", sent_at=NOW, online=True))

    def request(self, request: Any) -> list[Event]:
        changes = decide(self.twin, request, NOW)
        facts = stamp(self.twin, changes, home_id="h1", device_id="d1", now=NOW, causation_id=None)
        for fact in facts:
            wire = encode(fact)
            decoded = decode_fact(wire)  # the codec and the storable checks every consumer runs
            assert decoded == fact
            assert fact_type(wire) == fact.type
            self.projection.apply(decoded, wire)
            self.book.apply(decoded)
            self.twin = evolve(self.twin, decoded)
            self.facts.append(decoded)
        return facts

    def command(self, name: str, params: dict[str, Any]) -> list[Event]:
        return self.request(SubmitCommand(request_id=uuid.uuid4(), device_id="d1", sent_at=NOW, home_id="h1",
                                          command_id=uuid.uuid4(), name=name, params=params,
                                          expires_at=NOW + timedelta(minutes=1)))  # fmt: skip

    def report(self, state: dict[str, Any]) -> None:
        self.seq += 1
        payload = encode_message(StateMessage(seq=self.seq, at=NOW, state=state))
        request = to_request(state_topic("d1"), payload, NOW)  # the gateway's edge checks
        assert isinstance(request, ReportState)
        self.request(request)


@pytest.mark.parametrize("name", TYPES)
def test_every_fact_of_a_type_is_taken_in_by_every_consumer(name: str) -> None:
    kind = DEVICE_TYPES[name]
    recorded: set[str] = set()
    for command in kind.commands:
        for params in samples(command):
            device = Device(kind)
            assert kind.validate(command.name, params) is not None
            for fact in device.command(command.name, params):
                if isinstance(payload := getattr(fact, "payload", None), DesiredSetPayload):
                    recorded.add(payload.setting)
                    assert device.twin is not None
                    assert device.twin.commands[str(payload.command_id)].setting == payload.setting
    assert recorded == {s.name for s in kind.settings}, "a setting no command records"
    device = Device(kind)
    device.report(SIM_MODELS[name].for_fleet(FleetOptions(), "d1", random.Random(1), 0.0).state)
    assert device.twin is not None
    assert device.projection.twins["d1"] == device.twin
    assert reduce(evolve, device.facts, None) == device.twin  # a replay rebuilds the same twin


@pytest.mark.parametrize("name", TYPES)
def test_the_simulator_plays_every_type_as_it_declares_itself(name: str) -> None:
    kind = DEVICE_TYPES[name]
    assert name in SIM_MODELS, f"no hearth_simulator.devices.sim_{name} with a MODEL"
    assert demo_counts()[name] > 0, "the demo home should have one"
    declared = {k.name: k.value for k in kind.all_state}
    for seed in range(5):
        model = SIM_MODELS[name].for_fleet(FleetOptions(), f"d{seed}", random.Random(seed), 0.0)
        state = model.state
        assert "firmware_version" in state
        for key, value in state.items():
            assert key in declared, f"{name} reports {key!r}, which its type does not declare"
            declared[key].check(key, value)
    for command in kind.commands:
        for params in samples(command):
            device = Device(kind)
            facts = device.command(command.name, kind.validate(command.name, params))
            desired = next(
                (p.desired for f in facts if isinstance(p := getattr(f, "payload", None), DesiredSetPayload)),
                None,
            )
            if desired is None:
                continue  # refused in this state (a rule of the type): nothing for the device to do
            model = SIM_MODELS[name].for_fleet(FleetOptions(), "d1", random.Random(7), 0.0)
            ok, reason = model.apply_command(command.name, params, 1.0)
            assert ok, (command.name, params, reason)
            t = 1.0
            while not kind.converged(desired, model.state) and t < 600:
                t += 1.0
                model.step(t)
            assert kind.converged(desired, model.state), (command.name, params, desired, model.state)


def test_the_analytics_read_every_key_a_type_rolls_up() -> None:
    columns = {f.name: f.dataType.typeName() for f in REPORTED.fields}
    for kind in DEVICE_TYPES.values():
        for key in kind.state:
            if key.rollup:
                assert columns.get(key.name) == "double", key.name
        for figure_key in [m.key for m in kind.minutes] + [c.key for c in kind.counts]:
            assert columns.get(figure_key) == "string", figure_key


def test_every_type_serves_a_schema_the_live_page_can_draw() -> None:
    for schema in device_type_schemas():
        assert schema["state"]["firmware_version"]["type"] == "string"
        for command in schema["commands"].values():
            forms = command["params"].get("oneOf", [command["params"]])
            assert all(form["type"] == "object" for form in forms)
