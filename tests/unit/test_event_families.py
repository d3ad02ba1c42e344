"""The event schema declared by family (record_envelope, device_facts, admin_facts, inbox_requests,
topic_records) stays one schema: ``hearth_shared.schema.events`` exports every family's names, and its two
registries hold every fact and request type, so the codecs decode all of them."""

from __future__ import annotations

import importlib
from types import ModuleType

import msgspec
import pytest

from hearth_shared.schema import events
from hearth_shared.schema.events import EVENT_TYPES, INBOUND_TYPES, Event, Inbound, wire_name

pytestmark = pytest.mark.unit

FAMILIES = ("record_envelope", "device_facts", "admin_facts", "inbox_requests", "topic_records")


def _family(name: str) -> ModuleType:
    return importlib.import_module(f"hearth_shared.schema.{name}")


def _declared(base: type[msgspec.Struct]) -> set[type[msgspec.Struct]]:
    """Every subclass of ``base`` the families declare (other record streams have envelopes of their own)."""
    modules = {f"hearth_shared.schema.{name}" for name in FAMILIES}
    found, todo = set(), [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__ in modules:
                found.add(sub)
    return found


def test_events_exports_every_public_name_of_every_family() -> None:
    for name in FAMILIES:
        module = _family(name)
        public = {
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", "") == module.__name__
        }
        assert public <= set(events.__all__), (name, public - set(events.__all__))
        for n in public:
            assert getattr(events, n) is getattr(module, n)


def test_every_fact_and_request_type_is_registered_once() -> None:
    assert set(EVENT_TYPES) == _declared(Event), "a fact type missing from EVENT_TYPES is never decoded"
    assert set(INBOUND_TYPES) == _declared(Inbound), "a request type missing from INBOUND_TYPES"
    assert len(EVENT_TYPES) == len(set(EVENT_TYPES)) and len(INBOUND_TYPES) == len(set(INBOUND_TYPES))
    tags = [wire_name(t) for t in (*EVENT_TYPES, *INBOUND_TYPES)]
    assert len(tags) == len(set(tags)), "two record types share a wire tag"
