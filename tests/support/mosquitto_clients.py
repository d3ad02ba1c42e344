"""Being a device (or watching the broker) with Debian's ``mosquitto_pub``/``mosquitto_sub``: MQTT
clients nobody here wrote. Exit code 5 is the broker's "not authorised" at CONNECT."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from hearth_device_gateway.service.mosquitto_access import MosquittoAccess
from hearth_devstack.servers.mosquitto import MosquittoBroker, MqttAccount
from hearth_devstack.supervision.ports import free_port
from hearth_shared.schema.credentials import hash_secret, new_secret
from tests.support.waiting import eventually

NOT_AUTHORISED = 5


def broker_on_free_ports(data_dir: Path, log_dir: Path) -> MosquittoBroker:
    """A broker (not started) whose three listeners (devices, devices over TLS, platform) are on free
    ports."""
    return MosquittoBroker(
        data_dir=data_dir, port=free_port(), tls_port=free_port(), platform_port=free_port(), log_dir=log_dir
    )


def admit_devices(broker: MosquittoBroker, *device_ids: str) -> list[MqttAccount]:
    """Give each device a fresh credential on a running broker, as the broker-access follower would
    (rendered by ``MosquittoAccess``, then a reload); the accounts, with their plaintext secrets."""
    accounts = [MqttAccount(device_id, new_secret()) for device_id in device_ids]
    access = MosquittoAccess(
        hashes={a.username: hash_secret(a.password) for a in accounts},
        credential_ids={a.username: "c1" for a in accounts},
    )
    broker.password_file.write_text(access.password_file())
    broker.acl_file.write_text(access.acl_file(broker.services_acl_file.read_text()))
    broker.reload()
    return accounts


def connection_args(broker: MosquittoBroker, account: MqttAccount, *, tls: bool = False) -> list[str]:
    if tls:
        return ["-h", "localhost", "-p", str(broker.tls_port), "--cafile", str(broker.cafile),
                "-u", account.username, "-P", account.password]  # fmt: skip
    port = broker.port_for(account.username)  # a service account: the platform listener
    return ["-h", broker.host, "-p", str(port), "-u", account.username, "-P", account.password]


def publish(
    broker: MosquittoBroker,
    account: MqttAccount,
    topic: str,
    message: str | bytes,
    *,
    qos: int = 1,
    tls: bool = False,
    mqtt5: bool = False,
    retain: bool = False,
) -> subprocess.CompletedProcess[str]:
    """One ``mosquitto_pub``; its exit code and output (stderr says "not authorised" etc.)."""
    argv = ["mosquitto_pub", *connection_args(broker, account, tls=tls), "-t", topic, "-q", str(qos)]
    argv += ["-V", "5"] * mqtt5 + ["-r"] * retain
    payload = message if isinstance(message, bytes) else message.encode()
    done = subprocess.run([*argv, "-s"], input=payload, capture_output=True, timeout=30, check=False)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    )


def retained(broker: MosquittoBroker, topic: str) -> str:
    """The retained message on ``topic`` as Hearth's own account reads it ("" if none within 2 s)."""
    argv = ["mosquitto_sub", *connection_args(broker, broker.admin), "-t", topic, "-C", "1", "-W", "2"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout.strip()


async def wait_connect_code(
    broker: MosquittoBroker, account: MqttAccount, expected: int, timeout_s: float = 10.0
) -> float:
    """Publish once a tenth of a second until ``mosquitto_pub`` exits with ``expected``; the seconds
    it took (a credential reaches the broker through the inbox, the actor, the journal and a reload)."""
    topic = f"hearth/devices/{account.username}/availability"
    return await eventually(
        lambda: exits_with(broker, account, topic, expected),
        f"mosquitto_pub as {account.username} to exit {expected}",
        timeout_s=timeout_s,
        every_s=0.1,
    )


async def exits_with(broker: MosquittoBroker, account: MqttAccount, topic: str, expected: int) -> bool:
    """Whether ``mosquitto_pub`` as ``account`` to ``topic`` exits with ``expected``."""
    return (await asyncio.to_thread(publish, broker, account, topic, "online")).returncode == expected


@dataclass
class Subscriber:
    """A running ``mosquitto_sub -v`` (topic and payload per line) writing into a file."""

    broker: MosquittoBroker
    account: MqttAccount
    topics: list[str]
    out: Path
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Subscriber:
        argv = ["mosquitto_sub", *connection_args(self.broker, self.account), "-v", "-q", "1", *self.extra]
        for topic in self.topics:
            argv += ["-t", topic]
        with open(self.out, "wb") as sink:
            self.proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        return self

    def lines(self) -> list[str]:
        return self.out.read_text(errors="replace").splitlines()

    async def wait_for_line(self, text: str, timeout_s: float = 10.0) -> None:
        await eventually(
            lambda: any(text in line for line in self.lines()),
            f"a line with {text!r} from mosquitto_sub",
            timeout_s=timeout_s,
            shown=self.lines,
        )

    async def wait_exit(self, timeout_s: float) -> tuple[int, float]:
        """(exit code, seconds waited) once the client exits (it does when the broker refuses it)."""
        proc = self.proc
        assert proc is not None
        waited = await eventually(
            lambda: proc.poll() is not None,
            "mosquitto_sub to be disconnected",
            timeout_s=timeout_s,
            every_s=0.02,
            shown=self.lines,
        )
        return proc.returncode, waited

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
