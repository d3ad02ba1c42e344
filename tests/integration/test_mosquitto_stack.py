"""Mosquitto as a part of the local stack (hearth.stack.mosquitto): who may connect, TLS with the
certificate the stack makes, and what survives a restart (accounts, certificate, retained messages)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hearth.stack.mosquitto import MosquittoBroker, MqttAccount, mqtt_connect_code
from hearth.stack.process import free_port
from hearth.stack.servers import start_healthy
from tests.mosquitto_clients import NOT_AUTHORISED, publish

pytestmark = pytest.mark.integration


def broker_at(tmp_path: Path) -> MosquittoBroker:
    return MosquittoBroker(
        data_dir=tmp_path / "mqtt", port=free_port(), tls_port=free_port(), log_dir=tmp_path
    )


def retained(broker: MosquittoBroker, topic: str) -> str:
    argv = ["mosquitto_sub", "-h", broker.host, "-p", str(broker.port), "-u", broker.admin.username]
    argv += ["-P", broker.admin.password, "-t", topic, "-C", "1", "-W", "5"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout.strip()


def test_only_known_accounts_connect_and_tls_verifies_the_stacks_certificate(tmp_path: Path) -> None:
    broker = broker_at(tmp_path)
    part = start_healthy(broker.process(), 30)
    try:
        assert mqtt_connect_code(broker.host, broker.port, broker.admin) == 0
        assert mqtt_connect_code(broker.host, broker.port, broker.simulator) == 0
        stranger = MqttAccount("someone", "guess")
        assert mqtt_connect_code(broker.host, broker.port, stranger) == NOT_AUTHORISED
        anonymous = subprocess.run(
            ["mosquitto_pub", "-h", broker.host, "-p", str(broker.port), "-t", "hearth/x", "-m", "x"],
            capture_output=True, timeout=30, check=False,
        )  # fmt: skip
        assert anonymous.returncode == NOT_AUTHORISED
        for host in ("localhost", "127.0.0.1"):  # the certificate names both
            argv = ["mosquitto_pub", "-h", host, "-p", str(broker.tls_port), "--cafile", str(broker.cafile)]
            argv += ["-u", broker.admin.username, "-P", broker.admin.password, "-t", "hearth/x", "-m", "x"]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            assert done.returncode == 0, done.stderr
        # Without trusting the stack's certificate, TLS fails (the listener really is TLS).
        argv = ["mosquitto_pub", "-h", "localhost", "-p", str(broker.tls_port), "--capath", str(tmp_path)]
        argv += ["-u", broker.admin.username, "-P", broker.admin.password, "-t", "hearth/x", "-m", "x"]
        assert subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode != 0
    finally:
        part.stop()


def test_a_restart_keeps_accounts_certificate_and_retained_messages(tmp_path: Path) -> None:
    broker = broker_at(tmp_path)
    part = start_healthy(broker.process(), 30)
    admin, certificate = broker.admin, broker.cafile.read_bytes()
    try:
        sent = publish(broker, admin, "hearth/devices/d1/availability", "online", retain=True)
        assert sent.returncode == 0, sent.stderr
    finally:
        part.stop()
    again = MosquittoBroker(
        data_dir=broker.data_dir, port=free_port(), tls_port=free_port(), log_dir=tmp_path / "again"
    )
    part = start_healthy(again.process(), 30)
    try:
        assert again.admin == admin and again.cafile.read_bytes() == certificate
        assert mqtt_connect_code(again.host, again.port, admin) == 0
        assert retained(again, "hearth/devices/d1/availability") == "online"
    finally:
        part.stop()
