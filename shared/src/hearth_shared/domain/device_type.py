"""What a device type provides. Each type is one module (thermostat.py, lock.py) listed in registry.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from hearth_shared.domain.twin import Twin
from hearth_shared.events import JSON, Event


class CommandInvalid(ValueError):
    """A command that cannot be carried out; ``reason`` is short and machine-readable."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class DeviceType(Protocol):
    @property
    def name(self) -> str:
        """The type's name, as in ``DeviceRegistered.device_type``."""

    @property
    def settings(self) -> Mapping[str, type[Event]]:
        """Each setting (a supersede group, e.g. "target") and the fact that records its desired keys."""

    def initial_reported(self) -> JSON:
        """What a freshly registered device is assumed to report."""

    def validate(self, command: str, params: JSON) -> JSON:
        """Normalized params, or raise ``CommandInvalid``. Stateless: the HTTP API answers 422 with it."""

    def plan(self, twin: Twin, command: str, params: JSON) -> tuple[str, JSON]:
        """``(setting, desired keys)`` for validated params, or raise ``CommandInvalid`` (state rules)."""

    def converged(self, desired: JSON, reported: JSON) -> bool:
        """Whether the device reached what a command desired."""

    def failure(self, reported: JSON) -> str | None:
        """A reason if this reported state fails every command in flight (a jammed lock), else None."""
