"""Request and response bodies of the command API (what the OpenAPI document shows)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hearth_shared.domain import device_type_names

IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"


class RegisterDeviceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_id: str | None = Field(None, pattern=IDENTIFIER, description="Chosen by the server when absent")
    home_id: str = Field(pattern=IDENTIFIER)
    type: str = Field(description="A registered device type, e.g. thermostat or lock")
    name: str = Field(min_length=1, max_length=120)
    simulated: bool = Field(False, description="Played by the local stack's simulator hub; no credentials")

    @field_validator("type")
    @classmethod
    def known_type(cls, value: str) -> str:
        known = device_type_names()
        if value not in known:
            raise ValueError(f"unknown device type {value!r}; known types: {', '.join(known)}")
        return value


class SubmitCommandBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, examples=["set_target_temperature"])
    params: dict[str, Any] = Field(default_factory=dict, examples=[{"target_c": 21.5}])
    expires_in_s: float | None = Field(None, gt=0, description="Deadline; 30 s when absent")


WaitFor = Literal["accepted", "dispatched", "acknowledged", "converged"]


class CommandAccepted(BaseModel):
    command_id: uuid.UUID
    device_id: str
    status: str
    name: str
    params: dict[str, Any]
    timed_out: bool | None = Field(None, description="With ?wait=: true when the timeout passed first")
