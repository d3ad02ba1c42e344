"""``hearth device connect``: a person is a device from a terminal, over TLS, against a real broker of its
own (its access files written here from a credential, as the broker-access follower would)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hearth_devstack.launch.server_startup import start_healthy
from hearth_devstack.servers.mosquitto import MosquittoBroker, MqttAccount
from tests.support.mosquitto_clients import (
    NOT_AUTHORISED,
    Subscriber,
    admit_devices,
    broker_on_free_ports,
    publish,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

DEVICE = "cli-lock-1"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[MosquittoBroker, MqttAccount]]:
    broker = broker_on_free_ports(tmp_path / "mqtt", tmp_path)
    part = start_healthy(broker.process(), 30)
    (device,) = admit_devices(broker, DEVICE)
    yield broker, device
    part.stop()


def hearth(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload,no-any-return]
        [str(Path(sys.executable).parent / "hearth"), *args], text=True, **kwargs
    )


def wait_for(path: Path, text: str, timeout_s: float = 60.0) -> None:
    """Until ``path`` holds ``text`` (the test is synchronous: one event loop run for the wait)."""
    asyncio.run(
        eventually(
            lambda: text in path.read_text(), f"{text!r} in {path}", timeout_s=timeout_s, shown=path.read_text
        )
    )


def test_a_person_receives_a_command_acks_it_and_reports_over_tls(
    broker: tuple[MosquittoBroker, MqttAccount], tmp_path: Path
) -> None:
    mosquitto, device = broker
    watcher = Subscriber(
        mosquitto, mosquitto.admin, [f"hearth/devices/{DEVICE}/#"], tmp_path / "watch"
    ).start()
    out = tmp_path / "device.out"
    out.write_text("")
    argv = ["device", "connect", DEVICE, "--password", device.password, "--host", "localhost"]
    argv += ["--port", str(mosquitto.tls_port), "--cafile", str(mosquitto.cafile)]
    person = hearth(*argv, stdin=subprocess.PIPE, stdout=out.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_for(out, "connected as")
        command_id = str(uuid.uuid4())
        command = {
            "command_id": command_id,
            "name": "unlock",
            "params": {},
            "expires_at": "2030-01-01T00:00:00Z",
        }
        sent = publish(mosquitto, mosquitto.admin, f"hearth/devices/{DEVICE}/commands", json.dumps(command))
        assert sent.returncode == 0, sent.stderr
        wait_for(out, f"command {command_id}: unlock")
        person.communicate('{"lock_state": "unlocked"}\nack\nquit\n', timeout=60)
        assert person.returncode == 0, out.read_text()
        time.sleep(0.5)
        lines = watcher.lines()
        assert f"hearth/devices/{DEVICE}/availability online" in lines
        assert any(
            line.startswith(f"hearth/devices/{DEVICE}/state ") and '"unlocked"' in line for line in lines
        )
        assert f'hearth/devices/{DEVICE}/acks {{"command_id":"{command_id}","result":"ok"}}' in lines
        assert lines[-1] == f"hearth/devices/{DEVICE}/availability offline"
    finally:
        if person.poll() is None:
            person.kill()
        watcher.stop()


def test_a_wrong_password_exits_5(broker: tuple[MosquittoBroker, MqttAccount]) -> None:
    mosquitto, _ = broker
    argv = ["device", "connect", DEVICE, "--password", "wrong", "--port", str(mosquitto.port)]
    person = hearth(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = person.communicate(timeout=60)
    assert person.returncode == NOT_AUTHORISED, output
    assert (
        publish(mosquitto, MqttAccount(DEVICE, "wrong"), f"hearth/devices/{DEVICE}/state", "{}").returncode
        == 5
    )
