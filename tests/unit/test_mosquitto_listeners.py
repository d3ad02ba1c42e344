"""The broker's listeners, as `hearth up` writes them (hearth_devstack.servers.mosquitto) and as compose
ships them (compose/mosquitto/mosquitto.conf), must keep the same rule: a listener that takes device
credentials forces client id = username (no session takeover), and the service accounts have a listener of
their own that takes no device."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mosquitto_clients import broker_on_free_ports

pytestmark = pytest.mark.unit

COMPOSE_CONF = Path(__file__).resolve().parents[2] / "compose" / "mosquitto" / "mosquitto.conf"


def listeners(config: str) -> list[dict[str, str]]:
    """Each listener's options (``listener`` itself under its key), in order; global options are left out."""
    blocks: list[dict[str, str]] = []
    for line in config.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.strip().partition(" ")
        if key == "listener":
            blocks.append({"listener": value})
        elif blocks:
            blocks[-1][key] = value
    return blocks


def assert_no_takeover(config: str) -> None:
    assert "per_listener_settings true" in config.splitlines()
    blocks = listeners(config)
    devices = [b for b in blocks if b.get("password_file", "").endswith("/passwd")]
    platform = [b for b in blocks if b.get("password_file", "").endswith("/services.passwd")]
    assert devices and platform and len(devices) + len(platform) == len(blocks), blocks
    for block in blocks:
        assert block.get("allow_anonymous") == "false", block
        assert block.get("acl_file", "").endswith("/acl"), block
    assert all(b.get("use_username_as_clientid") == "true" for b in devices), devices
    assert all("use_username_as_clientid" not in b for b in platform), platform


def test_the_local_stacks_broker_config_forces_client_ids_on_device_listeners(tmp_path: Path) -> None:
    broker = broker_on_free_ports(tmp_path / "mqtt", tmp_path)
    config = broker.write_config().read_text()
    assert_no_takeover(config)
    ports = {b["listener"].split()[0] for b in listeners(config)}
    assert ports == {str(broker.port), str(broker.tls_port), str(broker.platform_port)}
    assert broker.password_file.read_text() == ""  # no device before the follower renders them


def test_the_compose_broker_config_keeps_the_same_rule() -> None:
    assert_no_takeover(COMPOSE_CONF.read_text())
