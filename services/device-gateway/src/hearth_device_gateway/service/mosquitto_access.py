"""Who may connect to Mosquitto and what each may do, folded from the journal's facts. Pure: no I/O.

``MosquittoAccess`` applies ``device.registered`` (is the device simulated?) and
``device.credentials_issued`` / ``device.credentials_revoked`` (its hash in force) and renders the two
files the broker reads (``hearth_devstack.servers.mosquitto``): the device listeners' password file
(``username:$7$...`` lines, devices only) and the ACL file. Rendering is deterministic (sorted), so
the same journal always gives the same files and the broker's whole access state can be rebuilt from
the journal alone.

The ACL gives:

* every device (username = device id, ``%u``) write on its own ``state``, ``acks`` and ``availability``
  and read on its own ``commands`` and ``errors``, and nothing else: one set of ``pattern`` lines for all
  devices, so registering a device adds no ACL line;
* the simulator hub account every topic of each simulated device, one ``topic readwrite
  hearth/devices/{id}/#`` line per device (a wildcard over devices would let it act for real devices too),
  its own hub ``availability`` (its will) and read on its ``hearth/hubs/{hub}/devices/+`` (the follower's
  word that the broker lets it act for a device). One line, not one per channel, because Mosquitto 2.0.11
  appends each ACL line by walking the user's list from its head, so loading a user's lines is quadratic,
  and a reload blocks the whole broker while it runs: with 10,000 simulated devices, five lines each took
  9.5 s per reload, one line each 0.4 s (20,000: 1.5 s; measured on this machine, SIGHUP to the next
  CONNACK). The extra rights are harmless: the hub could write its own devices' ``commands`` and
  ``errors`` (which only it reads) and read what it wrote itself. A hub of many more devices needs another
  mechanism (a topic namespace per hub, or the dynamic-security plugin's roles);
* the service accounts what ``services.acl`` gives them (written by the stack, copied first), and the
  gateway account read on ``{RELOADS_ROOT}/{mark}``, where the mark is a digest of everything else in both
  files: the broker delivers the follower's message on that topic only once it has loaded these files
  (entrypoints/broker_access_follower.py waits for it before saying anything that depends on them).

Shards (``hearth_shared.schema.shards``): one ``MosquittoAccess`` per broker, for its ``shard``. It folds
every device (a device may move in later, with the credential it has), and renders only its shard's
devices into the password file: a device's secret works on its own broker and is refused by every other.
The simulator hub's lines name every simulated device on every shard: the hub is the platform's own
account, the devices it plays have no secret anyone could misuse, and a move of a simulated device then
needs no reload to race the hub (which would be dropped for a publish the new files deny). Its children,
for whom the follower speaks when the hub drops (availability_keeper.py), are this shard's only.

``pending`` are the credentials of this shard's devices issued and not yet confirmed loaded: after the reload
that loads them is confirmed, the follower asks the device actor to record ``device.credentials_loaded``
for each (entrypoints/broker_access_follower.py), which the command API's answer waits for.

The fold's whole state is saved and restored as a snapshot (``snapshot()`` / ``restore()``, which
entrypoints/broker_access_follower.py's ``TopicFollower`` takes and restores): an ``AccessSnapshotV1`` in
msgpack, the four fields as they are (``shards`` and ``pending`` were added with defaults: a snapshot from
before shards restores every device onto the default shard, with nothing pending). The format is Hearth's
and stays readable across releases (a change other than a field with a default is a new format, and the old
one is converted on restore): once a retention window has passed a device's ``device.credentials_issued``,
the snapshot is the only place its hash is left. The files rendered after a restore equal those rendered
from the fold it was taken of.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from hearth_shared.schema.credentials import hash_secret, is_password_hash
from hearth_shared.schema.events import (
    DeviceCredentialsIssued,
    DeviceCredentialsRevoked,
    DeviceRegistered,
    DeviceShardMoved,
    Event,
)
from hearth_shared.schema.ids import is_identifier
from hearth_shared.schema.mqtt import (
    ACKS,
    AVAILABILITY,
    COMMANDS,
    ERRORS,
    GATEWAY_ACCOUNT,
    RELOADS_ROOT,
    SIMULATOR_ACCOUNT,
    STATE,
    hub_availability_topic,
    hub_child_topic,
    topic,
)
from hearth_shared.schema.shards import DEFAULT_SHARD
from hearth_shared.schema.snapshot_format import SnapshotCodec

DEVICE_WRITES = (STATE, ACKS, AVAILABILITY)
DEVICE_READS = (COMMANDS, ERRORS)


class PendingCredential(msgspec.Struct, frozen=True, array_like=True):
    """A credential of this shard's device, issued and not yet confirmed loaded by its broker."""

    credential_id: uuid.UUID
    issued_at: datetime


@dataclass
class MosquittoAccess:
    """Device credentials in force and the simulated devices, applied fact by fact, for the broker of
    ``shard``."""

    shard: str = DEFAULT_SHARD
    hashes: dict[str, str] = field(default_factory=dict)  # device id -> its $7$ hash in force
    credential_ids: dict[str, str] = field(default_factory=dict)  # device id -> credential id in force
    simulated: set[str] = field(default_factory=set)
    # Devices whose credential was revoked and that have none since: they cannot say anything any more,
    # so their retained availability is Hearth's to set (availability_keeper.py).
    revoked: set[str] = field(default_factory=set)
    shards: dict[str, str] = field(default_factory=dict)  # device id -> its shard, unless the default
    pending: dict[str, PendingCredential] = field(default_factory=dict)  # this shard's, to confirm

    def shard_of(self, device_id: str) -> str:
        return self.shards.get(device_id, DEFAULT_SHARD)

    def here(self, device_id: str) -> bool:
        """Is the device on this broker's shard?"""
        return self.shard_of(device_id) == self.shard

    def simulated_here(self) -> list[str]:
        """The simulated devices of this shard (the simulator hub's children on this broker), sorted."""
        return sorted(d for d in self.simulated if self.here(d))

    def revoked_here(self) -> list[str]:
        return sorted(d for d in self.revoked if self.here(d))

    def apply(self, event: Event) -> bool:
        """Apply one fact; True when the broker's files change because of it."""
        device_id = event.device_id
        if not is_identifier(device_id):  # never a username or topic level the broker would misread
            return False
        if isinstance(event, DeviceRegistered):
            self._place(device_id, event.payload.shard)
            if event.payload.simulated and device_id not in self.simulated:
                self.simulated.add(device_id)
                return True
            return False
        if isinstance(event, DeviceShardMoved):
            was_here = self.here(device_id)
            self._place(device_id, event.payload.shard)
            if not self.here(device_id):
                self.pending.pop(device_id, None)
            return device_id in self.hashes and was_here != self.here(device_id)
        if isinstance(event, DeviceCredentialsIssued):
            payload = event.payload
            if not is_password_hash(payload.password_hash):
                return False
            self.hashes[device_id] = payload.password_hash
            self.credential_ids[device_id] = str(payload.credential_id)
            self.revoked.discard(device_id)
            if self.here(device_id):
                self.pending[device_id] = PendingCredential(payload.credential_id, payload.issued_at)
            return self.here(device_id)
        if isinstance(event, DeviceCredentialsRevoked):
            if self.credential_ids.get(device_id) != str(event.payload.credential_id):
                return False  # an older credential: the one in force stays
            del self.hashes[device_id], self.credential_ids[device_id]
            self.revoked.add(device_id)
            self.pending.pop(device_id, None)
            return self.here(device_id)
        return False

    def _place(self, device_id: str, shard: str) -> None:
        if shard == DEFAULT_SHARD:
            self.shards.pop(device_id, None)
        else:
            self.shards[device_id] = shard

    def take_pending(self) -> dict[str, PendingCredential]:
        """The credentials to confirm now (after a confirmed reload), and none pending any more."""
        pending, self.pending = self.pending, {}
        return pending

    def snapshot(self) -> bytes:
        """The whole state as an ``AccessSnapshotV1`` (sorted: the same state gives the same bytes)."""
        return _CODEC.encode(
            AccessSnapshotV1(
                hashes=dict(sorted(self.hashes.items())),
                credential_ids=dict(sorted(self.credential_ids.items())),
                simulated=sorted(self.simulated),
                revoked=sorted(self.revoked),
                shards=dict(sorted(self.shards.items())),
                pending=dict(sorted(self.pending.items())),
            )
        )

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's; raises (``msgspec.DecodeError``, ``ValueError``)
        and leaves the state as it was if ``data`` is not a snapshot this release can read."""
        saved = _CODEC.decode(data)
        if saved.hashes.keys() != saved.credential_ids.keys():
            raise ValueError("a snapshot whose hashes and credential ids name different devices")
        self.hashes = dict(saved.hashes)
        self.credential_ids = dict(saved.credential_ids)
        self.simulated = set(saved.simulated)
        self.revoked = set(saved.revoked)
        self.shards = dict(saved.shards)
        self.pending = dict(saved.pending)

    def password_file(self) -> str:
        """The device listeners' password file: one line per credential in force of a device of this
        shard, and nothing else (the service accounts are in ``services.passwd``, which only the platform
        listener reads)."""
        here = sorted(device_id for device_id in self.hashes if self.here(device_id))
        return "".join(f"{device_id}:{self.hashes[device_id]}\n" for device_id in here)

    def files(self, services_acl: str) -> BrokerFiles:
        """Both files, and the mark that tells the broker has loaded them (see the module docstring)."""
        passwd, acl = self.password_file(), self.acl_file(services_acl)
        mark = hashlib.sha256(f"{passwd}\0{acl}".encode()).hexdigest()[:16]
        marked = f"{acl}\nuser {GATEWAY_ACCOUNT}\ntopic read {RELOADS_ROOT}/{mark}\n"
        return BrokerFiles(passwd=passwd, acl=marked, mark=mark)

    def acl_file(self, services: str) -> str:
        """The broker's ACL file: service accounts, the simulator hub's devices, the device patterns."""
        parts = [services.rstrip("\n"), "", f"user {SIMULATOR_ACCOUNT}"]
        parts += [f"topic write {hub_availability_topic(SIMULATOR_ACCOUNT)}"]
        parts += [f"topic read {hub_child_topic(SIMULATOR_ACCOUNT, '+')}"]
        parts += [f"topic readwrite {topic(device_id, '#')}" for device_id in sorted(self.simulated)]
        parts += ["", "# every device: its own topics only (%u is the username, which is the device id)"]
        parts += [f"pattern write {topic('%u', channel)}" for channel in DEVICE_WRITES]
        parts += [f"pattern read {topic('%u', channel)}" for channel in DEVICE_READS]
        return "\n".join(parts) + "\n"


ACCESS_SNAPSHOT_FORMAT = 1


class AccessSnapshotV1(msgspec.Struct, frozen=True, kw_only=True):
    """``MosquittoAccess`` saved (see the module docstring). Never change its fields; a new one has a
    default (a snapshot saved before it reads as that)."""

    format: int = ACCESS_SNAPSHOT_FORMAT
    hashes: dict[str, str]
    credential_ids: dict[str, str]
    simulated: list[str]
    revoked: list[str]
    shards: dict[str, str] = msgspec.field(default_factory=dict)
    pending: dict[str, PendingCredential] = msgspec.field(default_factory=dict)


_CODEC = SnapshotCodec("broker access", AccessSnapshotV1, ACCESS_SNAPSHOT_FORMAT)


@dataclass(frozen=True)
class BrokerFiles:
    passwd: str
    acl: str
    mark: str  # the broker has loaded these files once it delivers ``{RELOADS_ROOT}/{mark}``


def service_files(gateway_password: str, simulator_password: str) -> tuple[str, str]:
    """(``services.passwd``, ``services.acl``): the service accounts' hashed lines and the gateway's ACL
    (every device topic, ``$SYS`` read, write on every reload mark); the simulator's ACL lines come from
    the journal."""
    accounts = {GATEWAY_ACCOUNT: gateway_password, SIMULATOR_ACCOUNT: simulator_password}
    passwd = "".join(f"{name}:{hash_secret(secret)}\n" for name, secret in accounts.items() if secret)
    acl = (
        f"user {GATEWAY_ACCOUNT}\ntopic readwrite hearth/#\ntopic read $SYS/#\ntopic write {RELOADS_ROOT}/#\n"
    )
    return passwd, acl


__all__ = ["AccessSnapshotV1", "BrokerFiles", "MosquittoAccess", "PendingCredential", "service_files"]
