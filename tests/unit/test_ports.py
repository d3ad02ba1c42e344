"""Free ports for test and bench stacks (``hearth_devstack.supervision.ports``): outside the kernel's
range for outgoing connections, never the same twice from one process before its range is gone through."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from hearth_devstack.supervision import ports
from hearth_devstack.supervision.ports import FREE_PORTS_ENV, free_port, free_ports, listener_ports


def test_free_ports_are_below_the_kernels_range_for_outgoing_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(FREE_PORTS_ENV, raising=False)
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    span = listener_ports()
    assert span.stop == ephemeral and len(span) == ports.BELOW_EPHEMERAL
    # what bind(0) gives (the old way) is in the kernel's range: any connection may take it meanwhile
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert s.getsockname()[1] >= ephemeral
    assert all(free_port() < ephemeral for _ in range(20))


def test_a_process_hands_out_each_port_once_until_its_range_is_gone_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = free_ports(30)  # 30 ports no stack of this process holds, as a range of their own
    monkeypatch.setenv(FREE_PORTS_ENV, f"{first}-{first + 29}")
    handed = [free_port() for _ in range(20)]
    assert len(set(handed)) == 20 and all(first <= p < first + 30 for p in handed)
    base = free_ports(5)  # a block in a row, none of it handed out yet
    assert first <= base and base + 5 <= first + 30 and not set(range(base, base + 5)) & set(handed)
    again = {free_port() for _ in range(30)}  # the range gone through: it starts over
    assert again == set(range(first, first + 30))


def test_a_port_taken_by_a_listener_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    first = free_ports(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        monkeypatch.setenv(FREE_PORTS_ENV, f"{first}-{first + 2}")
        assert {free_port() for _ in range(4)} == {first + 1, first + 2}
        assert free_ports(2) == first + 1
