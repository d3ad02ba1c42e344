"""The bench load's hand-built MQTT 5 packets (hearth_bench.load.mqtt_wire): what they encode, and how a
buffer of them is split (a packet cut off at the end waits for the next read)."""

from __future__ import annotations

import struct

import pytest

from hearth_bench.load import mqtt_wire

pytestmark = pytest.mark.unit


def test_variable_byte_integers() -> None:
    assert [mqtt_wire.varint(n) for n in (0, 127, 128, 16_383, 16_384)] == [
        b"\x00",
        b"\x7f",
        b"\x80\x01",
        b"\xff\x7f",
        b"\x80\x80\x01",
    ]


def test_a_publish_splits_back_into_its_topic_packet_id_and_payload() -> None:
    packet = mqtt_wire.publish("hearth/devices/t-1/state", b'{"seq":1}', 513)
    [(first, start, end)] = list(mqtt_wire.split(packet))
    assert first == 0x32  # PUBLISH, QoS 1
    assert mqtt_wire.publish_packet_id(packet, start) == 513
    assert packet[end - len(b'{"seq":1}') :] == b'{"seq":1}'
    assert packet[end - len(b'{"seq":1}') - 1] == 0  # no properties


def test_split_leaves_a_cut_off_packet_for_the_next_read() -> None:
    packets = [mqtt_wire.publish("t", bytes(300), i) for i in (1, 2, 3)]  # 2-byte remaining lengths
    data = b"".join(packets)
    for cut in (len(packets[0]) + 1, len(packets[0]) + 2, len(data) - 1):
        found = list(mqtt_wire.split(data[:cut]))
        assert [mqtt_wire.publish_packet_id(data, start) for _, start, _ in found] == [1, 2][: len(found)]
        assert found[-1][2] <= cut
    assert len(list(mqtt_wire.split(data))) == 3


def test_pubacks_and_connect_and_subscribe_are_well_formed() -> None:
    assert mqtt_wire.pubacks([1, 2]) == b"\x40\x02\x00\x01\x40\x02\x00\x02"
    connect = mqtt_wire.connect("c", "user", "secret", receive_maximum=20_000)
    [(first, start, end)] = list(mqtt_wire.split(connect))
    assert (first, end) == (mqtt_wire.CONNECT, len(connect))
    assert connect[start : start + 7] == b"\x00\x04MQTT\x05"
    assert connect[start + 7] == 0xC2  # username, password, clean start
    assert struct.pack("!H", 20_000) in connect and connect.endswith(b"\x00\x06secret")
    subscribe = mqtt_wire.subscribe(1, "$share/g/x/+/state")
    assert subscribe[0] == mqtt_wire.SUBSCRIBE and subscribe.endswith(b"$share/g/x/+/state\x01")


def test_connack_gives_its_reason_and_the_brokers_receive_maximum() -> None:
    assert mqtt_wire.connack(b"\x00\x00") == (0, mqtt_wire.DEFAULT_RECEIVE_MAXIMUM)
    # flags, reason, properties: a session expiry (4 bytes), a reason string, receive maximum 20
    properties = b"\x11\x00\x00\x0e\x10" + b"\x1f\x00\x02ok" + b"\x21\x00\x14"
    body = b"\x00\x00" + mqtt_wire.varint(len(properties)) + properties
    assert mqtt_wire.connack(body) == (0, 20)
    assert mqtt_wire.connack(b"\x00\x87\x00")[0] == 0x87  # not authorized


def test_a_connect_with_a_will_carries_it_between_the_client_id_and_the_username() -> None:
    connect = mqtt_wire.connect("d-1", "d-1", "pw", receive_maximum=10, will=("a/d-1", b"offline"))
    [(_, start, _)] = list(mqtt_wire.split(connect))
    assert connect[start + 7] == 0xC2 | 0x04 | 0x08 | 0x20  # and will, will QoS 1, will retain
    will = b"\x00" + b"\x00\x05a/d-1\x00\x07offline"  # no will properties, its topic, its payload
    assert connect.endswith(b"\x00\x03d-1" + will + b"\x00\x03d-1\x00\x02pw")
    retained = mqtt_wire.publish("a/d-1", b"online", 1, retain=True)
    assert retained[0] == mqtt_wire.PUBLISH | 0x02 | 0x01
