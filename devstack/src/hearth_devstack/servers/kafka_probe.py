"""Is a Kafka broker up, and which brokers does it know? Answered with one Metadata request.

Speaks the wire protocol directly (Metadata v4, no topics), so these are plain blocking calls that work
inside or outside an event loop and need no client library: the stack's health checks use them for one
broker (``kafka_answers``: it lists itself) and for a cluster (``kafka_broker_ports``: it lists all).
"""

from __future__ import annotations

import socket
import struct


def kafka_answers(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    """True when a Kafka broker on host:port answers a Metadata request and lists itself as a live broker."""
    return port in kafka_broker_ports(port, host, timeout)


def kafka_broker_ports(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> set[int]:
    """The ports of the live brokers the broker on host:port lists; empty if it does not answer (yet)."""
    client_id = b"hearth-health"
    request = struct.pack(">hhih", 3, 4, 1, len(client_id)) + client_id + struct.pack(">ib", 0, 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _read(sock, 4))
            if not 12 <= size <= 1 << 20:  # not a Kafka reply (another server on the port)
                return set()
            body = _read(sock, size)
    except OSError:
        return set()
    try:
        return _listed_ports(body)
    except struct.error:  # a reply too short to be Metadata v4: not (yet) a Kafka broker
        return set()


def _listed_ports(body: bytes) -> set[int]:
    """The broker ports a Metadata v4 response (after its size) lists, if it answers our request."""
    # correlation_id, throttle_time_ms, then the brokers: [node_id, host, port, rack]
    correlation_id, _throttle, brokers = struct.unpack_from(">iii", body)
    if correlation_id != 1:
        return set()
    ports, at = set(), 12
    for _ in range(brokers):
        at += 4
        (host_len,) = struct.unpack_from(">h", body, at)
        at += 2 + host_len
        (broker_port, rack_len) = struct.unpack_from(">ih", body, at)
        at += 6 + max(rack_len, 0)
        ports.add(broker_port)
    return ports


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        data += chunk
    return data
