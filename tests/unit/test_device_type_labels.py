"""What a person reads of each device type is declared with it (hearth_shared.domain.device_card and each
type's module): every state key and every param has a label, every number a unit the page can write,
every text value with a fixed set its words; each card leads with keys its type has, and its controls
name commands and params that take what they would send. The schema the query API serves carries it
all, so the live page needs no list of its own."""

from __future__ import annotations

import pytest

from hearth_shared.domain.device_card import UNIT_SYMBOLS, Control
from hearth_shared.domain.device_type import DeviceType, Param, Value
from hearth_shared.domain.registry import DEVICE_TYPES, device_type_schemas

pytestmark = pytest.mark.unit

TYPES = sorted(DEVICE_TYPES)


def _params(kind: DeviceType) -> list[tuple[str, Param]]:
    return [(c.name, p) for c in kind.commands for form in c.forms for p in form]


def _readable(value: Value, what: str) -> None:
    if value.type in ("number", "integer"):
        assert value.unit in UNIT_SYMBOLS, f"{what}: a number needs a unit UNIT_SYMBOLS writes"
    for word in value.values:
        assert value.labels.get(word), f"{what}: no words for its value {word!r}"
    assert set(value.labels) <= set(value.values), f"{what}: words for values it cannot take"


@pytest.mark.parametrize("name", TYPES)
def test_every_state_key_has_a_label_and_numbers_a_unit(name: str) -> None:
    kind = DEVICE_TYPES[name]
    assert kind.label
    for key in kind.all_state:
        assert key.label, f"{name}.{key.name} has no label"
        _readable(key.value, f"{name}.{key.name}")


@pytest.mark.parametrize("name", TYPES)
def test_every_command_and_param_has_a_label(name: str) -> None:
    kind = DEVICE_TYPES[name]
    for command in kind.commands:
        assert command.label, f"{name} {command.name} has no label"
    for command_name, param in _params(kind):
        assert param.label, f"{name} {command_name} {param.name} has no label"
        _readable(param.value, f"{name} {command_name} {param.name}")


def _param(kind: DeviceType, control: Control) -> Param:
    found = [p for command, p in _params(kind) if command == control.command and p.name == control.param]
    assert found, f"{kind.name}: {control.command} has no param {control.param!r}"
    return found[0]


@pytest.mark.parametrize("name", TYPES)
def test_a_card_names_what_its_type_has(name: str) -> None:
    kind = DEVICE_TYPES[name]
    keys = {k.name: k for k in kind.all_state}
    commands = {c.name for c in kind.commands}
    assert kind.card.controls, f"{name}'s card has no control"
    assert set(kind.card.primary) <= set(keys)
    for control in kind.card.controls:
        assert control.key in keys and control.command in commands, control
        if control.kind == "toggle":
            assert control.off_command in commands and control.on_value in keys[control.key].value.values
            continue
        param = _param(kind, control).value
        if control.kind == "stepper":
            assert param.step and param.minimum is not None and param.maximum is not None, control
        elif control.kind == "slider":
            assert param.minimum is not None and param.maximum is not None, control
        else:
            assert param.values, control
        assert param.type == keys[control.key].value.type, f"{control}: the key and the param differ"


def test_the_schema_carries_labels_units_and_the_card() -> None:
    by_type = {s["type"]: s for s in device_type_schemas()}
    thermostat = by_type["thermostat"]
    ambient = thermostat["state"]["ambient_c"]
    assert thermostat["label"] == "Thermostat"
    assert (ambient["title"], ambient["x-unit-symbol"]) == ("Temperature", "°C")
    assert thermostat["state"]["hvac_action"]["x-labels"]["heating"] == "Heating"
    target = thermostat["commands"]["set_target_temperature"]["params"]["oneOf"][0]["properties"]["target_c"]
    assert (target["title"], target["x-unit-symbol"], target["multipleOf"]) == ("Target", "°C", 0.5)
    assert thermostat["card"]["controls"][0] == {
        "kind": "stepper", "key": "target_c", "command": "set_target_temperature", "param": "target_c",
    }  # fmt: skip
    toggle = by_type["lock"]["card"]["controls"][0]
    assert (toggle["command"], toggle["on_value"], toggle["off_command"]) == ("lock", "locked", "unlock")
