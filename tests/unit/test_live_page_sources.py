"""What the live page's scripts must stay in step with: they name no device type and no type's state key
(each device is drawn from its type's schema, GET /v1/device-types: its labels, units, card), index.html
loads every script in static/ (a module left out fails silently in the browser), and the admin commands
the page draws are the ones the domain takes, each with a params schema whose every param
``validate_admin`` checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hearth_read_models.live.page import STATIC
from hearth_shared.domain import CommandInvalid, device_type_names
from hearth_shared.domain.admin import ADMIN_COMMANDS, admin_command_schemas, validate_admin
from hearth_shared.domain.registry import DEVICE_TYPES

pytestmark = pytest.mark.unit

SCRIPTS = sorted(STATIC.glob("*.js"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_names_a_device_type(script: Path) -> None:
    text = script.read_text()
    named = [t for t in device_type_names() if re.search(rf"\b{re.escape(t)}\b", text)]
    assert named == [], f"{script.name} names {named}: draw it from GET /v1/device-types instead"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_names_a_state_key(script: Path) -> None:
    text = script.read_text()
    keys = sorted({k.name for kind in DEVICE_TYPES.values() for k in kind.state})
    named = [k for k in keys if re.search(rf"\b{re.escape(k)}\b", text)]
    assert named == [], f"{script.name} names {named}: its type's schema labels and places them"


def test_the_page_loads_every_script_once() -> None:
    page = (STATIC / "index.html").read_text()
    loaded = re.findall(r'<script src="/static/([^"]+)"', page)
    assert sorted(loaded) == [p.name for p in SCRIPTS]
    assert loaded[-1] == "app.js"  # the modules first: app.js calls them as it starts


def test_the_admin_command_schemas_are_the_domains_admin_commands() -> None:
    schemas = admin_command_schemas()
    assert set(schemas) == set(ADMIN_COMMANDS)
    samples = {"version": "2.0.0", "url": "https://firmware.example/x.bin", "sha256": "ab" * 32}
    for name, schema in schemas.items():
        params = schema["params"]
        assert schema["admin"] is True
        assert params["required"] == list(params["properties"])
        given = {p: samples[p] for p in params["properties"]}
        assert validate_admin(name, given) == given  # what the schema asks for is what is accepted
        for missing in params["required"]:
            with pytest.raises(CommandInvalid):
                validate_admin(name, {p: v for p, v in given.items() if p != missing})
