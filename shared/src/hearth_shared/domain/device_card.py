"""How a person sees a device type: what its card leads with, and how its units are written.

Each type declares, beside its state keys and commands (device_type.py), a ``Card``: the state keys
that matter most (``primary``, shown first and large: a thermostat's temperature, a lock's state) and
its primary ``controls``, each bound to one state key and one command of the type. The live page draws
every card from this declaration as the query API serves it (``GET /v1/device-types``: ``card``), and
lists the type's other keys after it, labelled, with their units; so a new type needs nothing in the
page, and the page names no key.

A control is one of four kinds, each drawn the same for every type:

* ``stepper``: the key's value with minus and plus buttons, each sending ``command`` with ``param``
  one step (the param's ``step``) below or above the value (a thermostat's target);
* ``choice``: the param's values (``Value.values``, shown by their labels) as a list, sending
  ``command`` with the one picked (a thermostat's mode);
* ``slider``: a range over the param's minimum to maximum, sending ``command`` with ``param`` once let
  go (a light's brightness);
* ``toggle``: one button that sends ``off_command`` while the key is at ``on_value`` and
  ``on_command`` otherwise (a lock: "Unlock" while locked, "Lock" otherwise); ``switch`` draws it as a
  switch showing the key's value (a light's power) rather than a button naming the command.

"The key's value" is what was asked if a command asked for it (the twin's desired), else what the
device reports: a control shows where the key is going. A unit test checks every declaration names
keys, commands and params its type has (tests/unit/test_device_type_labels.py). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hearth_shared.schema.events import JSON

ControlKind = Literal["stepper", "choice", "slider", "toggle"]

# How each unit a type declares (``Value.unit``) is written next to a value. A count has no symbol: its
# label says what is counted ("Set by hand 3").
UNIT_SYMBOLS: dict[str, str] = {"degC": "°C", "%": "%", "K": "K", "s": "s", "count": ""}


@dataclass(frozen=True)
class Control:
    """A card's control of one state key (see the module's docstring for each kind)."""

    kind: ControlKind
    key: str
    command: str
    param: str = ""  # stepper, choice, slider: the command's param that carries the new value
    on_value: str = ""  # toggle: the key's value that ``command`` reaches
    off_command: str = ""  # toggle: the command sent while the key is at ``on_value``
    switch: bool = False  # toggle: drawn as a switch

    def as_json(self) -> JSON:
        shown: JSON = {"kind": self.kind, "key": self.key, "command": self.command}
        if self.param:
            shown["param"] = self.param
        if self.kind == "toggle":
            shown.update(on_value=self.on_value, off_command=self.off_command, switch=self.switch)
        return shown


def stepper(key: str, command: str, param: str) -> Control:
    return Control("stepper", key, command, param)


def choice(key: str, command: str, param: str) -> Control:
    return Control("choice", key, command, param)


def slider(key: str, command: str, param: str) -> Control:
    return Control("slider", key, command, param)


def toggle(key: str, on_value: str, on_command: str, off_command: str, *, switch: bool = False) -> Control:
    return Control("toggle", key, on_command, on_value=on_value, off_command=off_command, switch=switch)


@dataclass(frozen=True)
class Card:
    """What a device's card leads with: ``primary`` keys (in this order) and ``controls``."""

    primary: tuple[str, ...] = ()
    controls: tuple[Control, ...] = ()

    def as_json(self) -> JSON:
        return {"primary": list(self.primary), "controls": [c.as_json() for c in self.controls]}
