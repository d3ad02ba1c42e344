"""The gateway links' lean PUBLISH parse (hearth_shared.adapters.mqtt_link, ``route_batches``): the usual
packet (QoS 0 or 1, no properties) is read as gmqtt would read it; anything else is left to gmqtt. And what
``subscribed()`` waits for after a reconnect, and how long the link waits before it reconnects."""

from __future__ import annotations

import asyncio
import random

import pytest

from hearth_bench.load import mqtt_wire
from hearth_shared.adapters import mqtt_link
from hearth_shared.adapters.mqtt_link import STEADY_S, MqttLink
from tests.support.waiting import eventually

pytestmark = pytest.mark.unit


def _body(packet: bytes) -> tuple[int, bytes]:
    [(header, start, end)] = list(mqtt_wire.split(packet))
    return header, packet[start:end]


async def test_a_qos1_publish_without_properties_joins_the_batch_with_its_packet_id() -> None:
    async def handle(messages: list[tuple[str, bytes]]) -> None:
        raise AssertionError("only what is gathered is looked at here")

    link = MqttLink(client_id="t", username="u", password="p")
    link.route_batches(handle)
    assert link.batches is not None
    seen: list[tuple[int | None, str, bytes]] = []
    link.batches.add = lambda *message: seen.append(message)  # type: ignore[method-assign]
    parse = link.client._package_handler._handle_publish_packet
    parse(*_body(mqtt_wire.publish("hearth/devices/t-1/state", b'{"seq":1}', 258)))
    assert seen == [(258, "hearth/devices/t-1/state", b'{"seq":1}')]


async def test_a_publish_with_properties_is_left_to_gmqtt() -> None:
    link = MqttLink(client_id="t", username="u", password="p")
    own: list[tuple[int, bytes]] = []
    link.client._package_handler._handle_publish_packet = lambda header, body: own.append((header, body))

    async def handle(messages: list[tuple[str, bytes]]) -> None:
        raise AssertionError("not through the lean parse")

    link.route_batches(handle)
    header, body = _body(mqtt_wire.publish("t/x", b"p", 1))
    with_properties = body[: 2 + 3 + 2] + b"\x02\x01\x01" + b"p"  # payload format indicator
    link.client._package_handler._handle_publish_packet(header, with_properties)
    await asyncio.sleep(0)
    await eventually(lambda: own == [(header, with_properties)], "gmqtt's own parse", timeout_s=1)


async def test_after_a_reconnect_subscribed_waits_for_the_renewed_subscriptions() -> None:
    """After every CONNACK but the first the link subscribes again (the broker may have lost the session,
    e.g. killed before it saved it), and ``subscribed()`` covers those renewals: until the broker grants
    them a message to the topic may find no subscriber. gmqtt is not connected here, so the renewal stays
    in the outbox, never granted."""
    link = MqttLink(client_id="t", username="u", password="p")
    link.subscribe("hearth/devices/t/commands")
    link._on_connect(link.client, 0, 0, None)  # the first CONNACK
    link._outbox[0].done.set_result(None)  # granted on the first connection
    await link.subscribed(timeout_s=1)
    link._on_connect(link.client, 0, 0, None)  # a reconnect's CONNACK
    with pytest.raises(TimeoutError):
        await link.subscribed(timeout_s=0.2)


async def test_a_connection_dropped_at_once_backs_off_and_one_that_lasted_is_followed_quickly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker that takes the connection and drops it at once (a birth the credential may not publish)
    gets the client back ever more slowly, not once a second; after a connection that lasted, the next
    reconnect is quick again (a restarted broker has its clients back at once)."""
    link = MqttLink(client_id="t", username="u", password="p", backoff_s=0.5, backoff_max_s=30.0)
    now = [1000.0]
    monkeypatch.setattr(mqtt_link, "monotonic", lambda: now[0])
    monkeypatch.setattr(random, "uniform", lambda low, high: 1.0)  # no jitter

    def connected_for(seconds: float) -> float:
        link._on_connect(link.client, 0, 0, None)
        now[0] += seconds
        link._on_disconnect(link.client, None)
        return float(link.client.reconnect_delay)

    assert [connected_for(0.1) for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert connected_for(STEADY_S) == 1.0
    assert connected_for(0.1) == 2.0
