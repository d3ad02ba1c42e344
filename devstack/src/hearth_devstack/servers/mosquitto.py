"""Eclipse Mosquitto, the MQTT broker devices connect to, as a part of the local stack (no Docker).

Debian's ``mosquitto`` package (2.0.x, installed by ``make setup``) runs from a configuration file this
module writes into the broker's data directory on every start:

* two listeners for devices, plain (``port``, 1883 by default) and TLS (``tls_port``, 8883), and one for
  the platform's own components (``platform_port``, 1884: the device gateways, the broker-access follower,
  the simulator hub), all on ``host`` (127.0.0.1) and all asking for a username and password
  (``allow_anonymous false``). Each listener has its own settings (``per_listener_settings true``):
  the device listeners take only device credentials (``passwd``) and force the client id to be the
  username (``use_username_as_clientid``), so no device can connect under another's client id and take
  its session over (the broker would drop the first connection); the platform listener takes only the
  service accounts (``services.passwd``), whose processes choose their own client ids (several gateway
  processes share one account, each with its persistent session). Both read the same ACL file. So a
  device has one connection at a time: a second connection with its credential takes the first over
  (as with AWS IoT Core's client ids);
* the TLS certificate is one the stack makes once with the ``openssl`` CLI (a self-signed certificate for
  ``localhost`` and ``127.0.0.1``, kept in ``<data>/tls/``); a client trusts it with
  ``--cafile <data>/tls/server.crt``. For a real certificate, pass ``certfile`` and ``keyfile`` (``hearth
  up --mqtt-certfile/--mqtt-keyfile``, PEM files; the key readable by the broker's user): nothing is
  generated then;
* persistence (retained messages, QoS 1 sessions) in the data directory, the log on stdout (the
  ManagedProcess's log file), and a pid file so the broker can be told to reload (SIGHUP).

Who may connect and what each may do is in files the broker reads at start and on every SIGHUP:
``<data>/access/passwd`` (the devices' ``username:$7$...`` lines, the PBKDF2-SHA512 hashes of
``hearth_shared.schema.credentials``), ``<data>/access/services.passwd`` (the service accounts') and
``<data>/access/acl``. The broker-access follower (``hearth_device_gateway.broker_access``) renders
``passwd`` and ``acl`` from the journal's device credentials plus the service accounts' ACL; this module
writes ``services.*`` and, when nothing was rendered yet, a ``passwd`` with no device and an ``acl`` with
only the service accounts, so the broker starts before that follower.

Service accounts (username, secret kept in ``<data>/access/<name>.secret``, mode 0600; a stack of several
brokers, one per MQTT shard, keeps them once, in the first broker's, ``accounts_dir``):

* ``_hearth_gateway``: Hearth's own components (the device gateway, the tests): read and write every
  device topic, ``$SYS`` read. The leading underscore keeps it apart from every device id
  (``hearth_shared.schema.ids``: a device id starts with a letter or digit), so no device can be registered
  under a service account's name.
* ``_hearth_simulator``: the fleet simulator, a hub acting for every device registered with
  ``"simulated": true`` and for nothing else; its per-device ACL lines are added by the follower.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hearth_device_gateway.service.mosquitto_access import service_files
from hearth_devstack.supervision.ports import require_free_port
from hearth_devstack.supervision.process import ManagedProcess, StartupError
from hearth_shared.schema.credentials import new_secret
from hearth_shared.schema.mqtt import (
    DEVICE_PORT,
    DEVICE_TLS_PORT,
    GATEWAY_ACCOUNT,
    PLATFORM_PORT,
    SIMULATOR_ACCOUNT,
)

SERVICE_ACCOUNTS = (GATEWAY_ACCOUNT, SIMULATOR_ACCOUNT)
MOSQUITTO = "mosquitto"


@dataclass(frozen=True)
class MqttAccount:
    """A username and its plaintext secret, for Hearth's own MQTT clients."""

    username: str
    password: str


@dataclass(kw_only=True)
class MosquittoBroker:
    data_dir: Path
    port: int = DEVICE_PORT
    tls_port: int = DEVICE_TLS_PORT
    platform_port: int = PLATFORM_PORT  # the platform's own accounts only (see the module docstring)
    log_dir: Path
    host: str = "127.0.0.1"
    certfile: Path | None = None  # a real certificate (PEM); None: the stack's own self-signed one
    keyfile: Path | None = None
    # Where the service accounts' secrets are kept (None: ``access_dir``); the brokers of one stack's MQTT
    # shards share them, so its gateways and simulator have one password for every shard.
    accounts_dir: Path | None = None

    # ------------------------------------------------------------------------------------------ where

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    @property
    def tls_url(self) -> str:
        return f"mqtts://{self.host}:{self.tls_port}"

    @property
    def platform_url(self) -> str:
        """Where Hearth's own components connect (service accounts only)."""
        return f"mqtt://{self.host}:{self.platform_port}"

    def port_for(self, username: str) -> int:
        """The plain listener an account connects to: the platform's for a service account, else devices'."""
        return self.platform_port if username in SERVICE_ACCOUNTS else self.port

    @property
    def access_dir(self) -> Path:
        return self.data_dir / "access"

    @property
    def password_file(self) -> Path:
        return self.access_dir / "passwd"

    @property
    def acl_file(self) -> Path:
        return self.access_dir / "acl"

    @property
    def services_password_file(self) -> Path:
        """The service accounts' ``passwd`` lines; the follower renders them first into ``passwd``."""
        return self.access_dir / "services.passwd"

    @property
    def services_acl_file(self) -> Path:
        return self.access_dir / "services.acl"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "mosquitto.pid"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "mosquitto.conf"

    @property
    def persistence_file(self) -> Path:
        """Its saved sessions and retained messages (Mosquitto's default name, in ``persistence_location``),
        written every ``autosave_interval`` and on a clean stop."""
        return self.data_dir / "persistence" / "mosquitto.db"

    @property
    def cafile(self) -> Path:
        """What a client passes as ``--cafile`` to trust the TLS listener."""
        return self.certfile or self.data_dir / "tls" / "server.crt"

    # ------------------------------------------------------------------------------------ accounts

    def account(self, username: str) -> MqttAccount:
        """A service account's credential, made (and its hash recorded) the first time it is asked for."""
        if username not in SERVICE_ACCOUNTS:
            raise ValueError(f"{username!r} is not a service account ({', '.join(SERVICE_ACCOUNTS)})")
        secrets_dir = self.accounts_dir or self.access_dir
        path = secrets_dir / f"{username}.secret"
        if not path.exists():
            secrets_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(new_secret())
        return MqttAccount(username, path.read_text().strip())

    @property
    def admin(self) -> MqttAccount:
        """The credential of Hearth's own components (the device gateway, tests)."""
        return self.account(GATEWAY_ACCOUNT)

    @property
    def simulator(self) -> MqttAccount:
        """The hub credential of the fleet simulator (only ``"simulated": true`` devices)."""
        return self.account(SIMULATOR_ACCOUNT)

    def write_service_access(self) -> None:
        """The service accounts' hashes and ACL; until the follower has rendered any, ``passwd`` with no
        device and ``acl`` with just the service accounts' lines."""
        passwd, acl = service_files(self.admin.password, self.simulator.password)
        _write_private(self.services_password_file, passwd)
        _write_private(self.services_acl_file, acl)
        if not self.password_file.exists() or not self.acl_file.exists():
            _write_private(self.password_file, "")
            _write_private(self.acl_file, self.services_acl_file.read_text())

    # ------------------------------------------------------------------------------------- process

    def ensure_certificate(self) -> tuple[Path, Path]:
        """(certfile, keyfile): the configured ones, or the stack's self-signed pair (made once)."""
        if self.certfile is not None or self.keyfile is not None:
            if self.certfile is None or self.keyfile is None:
                raise StartupError("MQTT TLS: give both a certificate file and a key file, or neither.")
            return self.certfile, self.keyfile
        tls = self.data_dir / "tls"
        cert, key = tls / "server.crt", tls / "server.key"
        if cert.exists() and key.exists():
            return cert, key
        if shutil.which("openssl") is None:
            raise StartupError("MQTT TLS: the `openssl` command is needed once to make a certificate.")
        tls.mkdir(parents=True, exist_ok=True)
        argv = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "825", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert),
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise StartupError(f"MQTT TLS: openssl could not make a certificate:\n{done.stderr[-2000:]}")
        key.chmod(0o600)
        return cert, key

    def write_config(self) -> Path:
        cert, key = self.ensure_certificate()
        self.write_service_access()
        persistence = self.persistence_file.parent
        persistence.mkdir(parents=True, exist_ok=True)
        lines = [
            "# Written by hearth_devstack.servers.mosquitto on every start: edit that module, not this file.",
            # Run as whoever started us (Debian's build would otherwise switch to a `mosquitto` user that
            # cannot write our data directory).
            f"user {getpass.getuser()}",
            f"pid_file {self.pid_file.resolve()}",
            "per_listener_settings true",
            "persistence true",
            f"persistence_location {persistence.resolve()}/",
            "autosave_interval 30",
            "log_dest stdout",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            "log_timestamp_format %Y-%m-%dT%H:%M:%S",
            "set_tcp_nodelay true",
            # A gateway that falls behind must not lose QoS 1 messages the broker already acknowledged to
            # a device: no count limit on a client's queue, a memory bound instead (256 MiB per client).
            "max_queued_messages 0",
            "max_queued_bytes 268435456",
            f"listener {self.port} {self.host}",
            *self._device_listener(),
            f"listener {self.tls_port} {self.host}",
            *self._device_listener(),
            f"certfile {cert.resolve()}",
            f"keyfile {key.resolve()}",
            "tls_version tlsv1.2",
            f"listener {self.platform_port} {self.host}",
            "allow_anonymous false",
            f"password_file {self.services_password_file.resolve()}",
            f"acl_file {self.acl_file.resolve()}",
        ]
        self.config_file.write_text("\n".join(lines) + "\n")
        return self.config_file

    def _device_listener(self) -> list[str]:
        """A device listener's settings: device credentials only, client id = username (no takeover)."""
        return [
            "allow_anonymous false",
            "use_username_as_clientid true",
            f"password_file {self.password_file.resolve()}",
            f"acl_file {self.acl_file.resolve()}",
        ]

    def process(self, name: str = "mosquitto") -> ManagedProcess:
        """The broker's process; ``name`` names it and its log (one per shard in a stack of several)."""
        require_free_port("MQTT", self.port)
        require_free_port("MQTT over TLS", self.tls_port)
        require_free_port("MQTT for the platform", self.platform_port)
        if shutil.which(MOSQUITTO) is None and not Path("/usr/sbin/mosquitto").exists():
            raise StartupError("MQTT: the `mosquitto` broker is not installed (make setup installs it).")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.write_config()
        binary = shutil.which(MOSQUITTO) or "/usr/sbin/mosquitto"
        return ManagedProcess(
            name=name,
            argv=[binary, "-c", str(config.resolve())],
            log_path=self.log_dir / f"{name}.log",
            healthy=self.healthy,
            url=self.url,
            stop_timeout_s=10.0,
            # SIGTERM (the default): Mosquitto saves its persistence file and exits.
        )

    def reload(self) -> None:
        """Make the broker re-read its password and ACL files (it drops clients no longer allowed)."""
        reload_broker(self.pid_file)

    def healthy(self) -> bool:
        """The broker accepts the gateway account's CONNECT on the platform listener (so it runs and has
        read its password files)."""
        return mqtt_connect_code(self.host, self.platform_port, self.admin) == 0


def reload_broker(pid_file: Path) -> None:
    """SIGHUP the broker whose pid is in ``pid_file``."""
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError) as exc:
        raise RuntimeError(f"no broker pid in {pid_file}: {exc}") from exc
    os.kill(pid, signal.SIGHUP)


def mqtt_connect_code(host: str, port: int, account: MqttAccount, timeout_s: float = 2.0) -> int:
    """Send an MQTT 3.1.1 CONNECT with ``account`` and return the CONNACK return code (0: accepted,
    5: not authorised). A health check with no client library: two packets of the protocol by hand."""

    def field(text: str) -> bytes:
        data = text.encode()
        return struct.pack("!H", len(data)) + data

    flags = 0x80 | 0x40 | 0x02  # username, password, clean session
    body = field("MQTT") + bytes([4, flags]) + struct.pack("!H", 10)
    body += field(f"hearth-health-{os.getpid()}") + field(account.username) + field(account.password)
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(bytes([0x10]) + _remaining_length(len(body)) + body)
        connack = b""
        while len(connack) < 4:
            chunk = sock.recv(4 - len(connack))
            if not chunk:
                raise ConnectionError("the broker closed the connection before its CONNACK")
            connack += chunk
        if connack[0] != 0x20:
            raise ConnectionError(f"expected a CONNACK, got packet type {connack[0] >> 4}")
        sock.sendall(b"\xe0\x00")  # DISCONNECT
        return connack[3]


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        n, digit = divmod(n, 128)
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader sees the old file or the new one), mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    partial.replace(path)


__all__ = [
    "GATEWAY_ACCOUNT",
    "SIMULATOR_ACCOUNT",
    "MosquittoBroker",
    "MqttAccount",
    "mqtt_connect_code",
    "reload_broker",
]
