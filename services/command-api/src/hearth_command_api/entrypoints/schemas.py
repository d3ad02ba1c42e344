"""Request and response bodies of the command API (what the OpenAPI document shows)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from hearth_shared.domain import device_type_names
from hearth_shared.domain.registry import commands_description
from hearth_shared.schema.ids import IDENTIFIER_PATTERN, find_unstorable, has_control_characters


class RegisterDeviceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_id: str | None = Field(
        None, pattern=IDENTIFIER_PATTERN, description="Chosen by the server when absent"
    )
    home_id: str = Field(pattern=IDENTIFIER_PATTERN)
    type: str = Field(description=f"A registered device type: {', '.join(device_type_names())}")
    name: str = Field(
        min_length=1, max_length=120, description="Any text on one line (no control characters)"
    )
    simulated: bool = Field(False, description="Played by the local stack's simulator hub; no credentials")

    @field_validator("name")
    @classmethod
    def one_line_of_text(cls, value: str) -> str:
        return printable(value)

    @field_validator("type")
    @classmethod
    def known_type(cls, value: str) -> str:
        known = device_type_names()
        if value not in known:
            raise ValueError(f"unknown device type {value!r}; known types: {', '.join(known)}")
        return value


class CommandBody(BaseModel):
    """A command's name and params as every route takes them (a device's command, a program entry, an
    automation's action): one line of text, finite numbers and text without control characters."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, examples=["set_target_temperature"])
    params: dict[str, Any] = Field(default_factory=dict, examples=[{"target_c": 21.0}])

    @field_validator("name")
    @classmethod
    def one_line_of_text(cls, value: str) -> str:
        return printable(value)

    @field_validator("params")
    @classmethod
    def storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        where = find_unstorable(value)
        if where is not None:
            raise ValueError(f"{where}: numbers must be finite and text may not hold control characters")
        return value


class SubmitCommandBody(CommandBody):
    params: dict[str, Any] = Field(
        default_factory=dict,
        examples=[{"target_c": 21.5}],
        description="Finite numbers and text without control characters only. " + commands_description(),
    )
    expires_in_s: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="Deadline; 30 s when absent"
    )


def printable(value: str) -> str:
    """Free text as every consumer can store it: no NUL, no control characters (hearth_shared.schema.ids)."""
    if has_control_characters(value):
        raise ValueError("may not contain NUL or other control characters (tab and newline included)")
    return value


DeviceId = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="The device's id")]

WaitFor = Literal["accepted", "dispatched", "acknowledged", "converged"]


class CommandAccepted(BaseModel):
    command_id: uuid.UUID
    device_id: str
    status: str
    twin_version: int | None = Field(
        None,
        description="The device's twin version at which the command reached `status` (the version of the "
        "fact that put it there): pass it as `min_version` to the query API to read the twin as of that "
        "status. Absent while the command's first fact is not in the journal yet (a fresh 202 `pending`)",
    )
    name: str
    params: dict[str, Any]
    timed_out: bool | None = Field(None, description="With ?wait=: true when the timeout passed first")
