"""Ports for the parts of a stack: the ones a user gives are checked free; tests and benches take free ones.

Free ports are taken from a range the kernel never hands out as the local port of an outgoing connection
(``net.ipv4.ip_local_port_range``: 32768-60999 on Linux unless changed). A port the kernel handed out by
``bind(("127.0.0.1", 0))`` is in that range, and is free only at that moment: between the choice and the
moment the part binds it (seconds later, once the parts it depends on are up) any process's connection to
Kafka, PostgreSQL or a broker may get it as its own port, and the part then fails to start with
``address already in use``. That happened in CI (stop 40's fresh clone: a query API of the scale-out test).
Below the kernel's range only a listener can take a port, and every listener of a test stack is a part
chosen here.

Two processes that choose at once must not choose the same ports (a port is not bound until its part
starts): each process goes through its range in order, from a random start, and never hands out a port
twice before it has gone through the whole range; ``HEARTH_FREE_PORTS`` ("first-last") gives a process
its own range (the tests give each pytest-xdist worker its own share: ``tests/conftest.py``).
"""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

from hearth_devstack.supervision.process import StartupError

FREE_PORTS_ENV = "HEARTH_FREE_PORTS"  # "first-last": where this process takes free ports
BELOW_EPHEMERAL = 12_288  # how many ports below the kernel's range free ports are taken from
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def require_free_port(name: str, port: int) -> None:
    if not port_is_free(port):
        raise StartupError(
            f"{name}: port {port} is already taken by another process. "
            f"Stop that process or choose another port (see `hearth up --help`)."
        )


def listener_ports() -> range:
    """Where free ports are taken from: ``HEARTH_FREE_PORTS`` if set, else the ``BELOW_EPHEMERAL`` ports
    below the kernel's range for outgoing connections."""
    if given := os.environ.get(FREE_PORTS_ENV):
        first, _, last = given.partition("-")
        return range(int(first), int(last) + 1)
    try:
        ephemeral = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768  # Linux's default
    return range(max(1024, ephemeral - BELOW_EPHEMERAL), ephemeral)


class _Cursor:
    """This process's place in its range: ports are handed out in order from it, so never twice before
    the range has been gone through (by then the stacks they went to have stopped, or hold them bound)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._span: range | None = None
        self._at = 0

    def take(self, count: int) -> int:
        with self._lock:
            span = listener_ports()
            if span != self._span:
                self._span, self._at = span, random.randrange(len(span))
            for _ in range(len(span)):
                base = span.start + self._at
                if base + count > span.stop:
                    self._at = 0
                    continue
                self._at = (self._at + 1) % len(span)
                if all(port_is_free(port) for port in range(base, base + count)):
                    self._at = (base + count - span.start) % len(span)
                    return base
        raise StartupError(f"found no {count} free ports in a row in {span.start}-{span.stop - 1}")


_cursor = _Cursor()


def free_ports(count: int) -> int:
    """The first of ``count`` ports in a row, each free now and not handed out before by this process."""
    return _cursor.take(count)


def free_port() -> int:
    """A port free now and not handed out before by this process (see the module's docstring)."""
    return _cursor.take(1)
