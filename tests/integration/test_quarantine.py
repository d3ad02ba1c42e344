"""Admin commands and quarantine through the real services: tokens, facts, the twin and the views."""

from __future__ import annotations

import httpx
import pytest
from typer.testing import CliRunner

from hearth.cli import app
from tests.integration.test_command_lifecycle import register
from tests.support.commands import final_command, send
from tests.support.device_link import DeviceLink
from tests.support.platform import SECRET, Platform
from tests.support.waiting import twin_when

pytestmark = pytest.mark.integration

FIRMWARE = {"version": "9.9.9", "url": "https://fw.example/lock-9.9.9.bin", "sha256": "0f" * 32}


async def test_a_home_token_cannot_reboot_update_or_quarantine(
    api: httpx.AsyncClient, admin_api: httpx.AsyncClient, query: httpx.AsyncClient, home: str
) -> None:
    device_id = await register(api, home, "lock")
    for name, params in (("reboot", {}), ("update_firmware", FIRMWARE)):
        refused = await send(api, device_id, name, params)
        assert refused.status_code == 403, refused.text
        assert "only an admin token" in refused.json()["detail"]
    quarantined = await api.post(f"/v1/devices/{device_id}/quarantine", json={"reason": "mine"})
    assert quarantined.status_code == 403 and "admin" in quarantined.json()["detail"]
    released = await api.delete(f"/v1/devices/{device_id}/quarantine")
    assert released.status_code == 403
    # an admin may, and a bad firmware is a 422 that says what is wrong, with nothing written
    bad = await send(admin_api, device_id, "update_firmware", {**FIRMWARE, "sha256": "nope"})
    assert bad.status_code == 422 and "sha256" in bad.text
    reboot = await send(admin_api, device_id, "reboot", {})
    assert reboot.status_code == 202, reboot.text
    twin = await twin_when(query, device_id, lambda t: t["quarantine"] is None and t["version"] >= 3)
    assert twin["quarantine"] is None  # the refused requests left nothing: no quarantine


async def test_a_quarantined_lock_refuses_unlock_until_released(
    api: httpx.AsyncClient,
    admin_api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    platform: Platform,
    home: str,
) -> None:
    async with DeviceLink(platform.settings) as device:
        device_id = await register(api, home, "lock")
        await device.report(device_id, {"lock_state": "locked", "door": "closed"})
        await twin_when(query, device_id, lambda t: t["connectivity"]["online"])

        answer = await admin_api.post(f"/v1/devices/{device_id}/quarantine", json={"reason": "tampering"})
        assert answer.status_code == 202, answer.text
        twin = await twin_when(query, device_id, lambda t: t["quarantine"] is not None)
        assert twin["quarantine"]["reason"] == "tampering" and twin["quarantine"]["since"]

        refused = await send(api, device_id, "unlock", {}, wait="converged")
        assert refused.json()["status"] == "rejected"
        view = await final_command(query, refused.json()["command_id"])
        assert view["status"] == "rejected" and view["reason"] == "quarantined", view
        twin = (await query.get(f"/v1/devices/{device_id}")).json()
        assert twin["desired"].get("lock_state") != "unlocked"

        # an admin command still reaches it: the firmware update is dispatched, and converges on the report
        update = await send(admin_api, device_id, "update_firmware", FIRMWARE)
        assert update.status_code == 202, update.text
        dispatched = await device.next_command(device_id)
        assert (dispatched.name, dispatched.params) == ("update_firmware", FIRMWARE)
        await device.ack(device_id, dispatched.command_id)
        await device.report(device_id, {"firmware_version": "9.9.9"})
        assert (await final_command(query, update.json()["command_id"]))["status"] == "converged"

        released = await admin_api.delete(f"/v1/devices/{device_id}/quarantine")
        assert released.status_code == 204
        await twin_when(query, device_id, lambda t: t["quarantine"] is None)
        unlock = await send(api, device_id, "unlock", {})
        assert (await device.next_command(device_id)).name == "unlock"
        history = (await query.get(f"/v1/devices/{device_id}/events", params={"limit": 200})).json()
        types = [fact["type"] for fact in history["items"]]
        assert "device.quarantined" in types and "device.released" in types, types
        assert unlock.status_code == 202


async def test_the_cli_quarantines_and_releases_and_says_what_the_api_refused(
    api: httpx.AsyncClient,
    query: httpx.AsyncClient,
    platform: Platform,
    home: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    device_id = await register(api, home, "lock")
    monkeypatch.setenv("HEARTH_TOKEN_SECRET", SECRET)
    where = ["--api", platform.command_api]
    cli = CliRunner()
    ran = cli.invoke(app, ["device", "quarantine", device_id, "--reason", "stolen", *where])
    assert ran.exit_code == 0, ran.output
    twin = await twin_when(query, device_id, lambda t: t["quarantine"] is not None)
    assert twin["quarantine"]["reason"] == "stolen"
    ran = cli.invoke(app, ["device", "release", device_id, *where])
    assert ran.exit_code == 0, ran.output
    await twin_when(query, device_id, lambda t: t["quarantine"] is None)
    refused = cli.invoke(app, ["device", "quarantine", device_id, "--reason", "", *where])
    assert refused.exit_code == 1 and "422" in refused.output, refused.output
