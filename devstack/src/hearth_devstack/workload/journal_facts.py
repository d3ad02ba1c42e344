"""Synthetic journals for tests and benchmarks: realistic facts, deterministic per seed, written fast.

``JournalFacts(devices)`` yields the facts of that many devices (half thermostats, half locks), round
robin: each registered first (with its credentials if asked), then mostly state reports, now and then a
command run to convergence, an anomaly or a connectivity blip, as the platform would have journalled
them. ``fill_journal`` appends the next N of them to a stack's journal in full record batches, keyed and
partitioned by device id as the device actor writes them. The tests (projector, rebuild, archive) and the
benchmarks (rebuild, batch, stream, restart) take their journals from here; nothing here measures.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka.partitioner import DefaultPartitioner

from hearth_shared.adapters.kafka import make_producer
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.credentials import hash_secret
from hearth_shared.schema.events import (
    AnomalyDetected,
    AnomalyDetectedPayload,
    CommandAccepted,
    CommandAcknowledged,
    CommandConverged,
    CommandDispatched,
    CommandRef,
    CommandRequested,
    CommandRequestedPayload,
    ConnectivityPayload,
    CredentialsIssuedPayload,
    DesiredSetPayload,
    DesiredStateSet,
    DeviceCameOnline,
    DeviceCredentialsIssued,
    DeviceRegistered,
    DeviceRegisteredPayload,
    DeviceWentOffline,
    Event,
    StateReported,
    StateReportedPayload,
    encode,
)

DEVICES_PER_HOME = 10
START = datetime(2026, 11, 1, tzinfo=UTC)


class JournalFacts:
    """Facts of ``devices`` devices (half thermostats, half locks), round robin, deterministic per seed.
    With ``credentials``, each registration is followed by the device's ``device.credentials_issued`` (a
    salted hash of a secret nobody keeps, as the command API issues them)."""

    def __init__(
        self, devices: int, seed: int = 7, prefix: str = "bench", *, credentials: bool = False
    ) -> None:
        self.rng = random.Random(seed)
        self.devices = devices
        self.prefix = prefix
        self.credentials = credentials
        self.clock = START

    def device(self, i: int) -> tuple[str, str, str]:
        """Device ``i``'s id, home and type (even ones are thermostats)."""
        kind = "thermostat" if i % 2 == 0 else "lock"
        return f"{self.prefix}-{kind}-{i:06d}", f"{self.prefix}-home-{i // DEVICES_PER_HOME:05d}", kind

    def __iter__(self) -> Iterator[Event]:
        streams = [self._device(*self.device(i)) for i in range(self.devices)]
        while True:
            for stream in streams:
                yield next(stream)

    def _device(self, device_id: str, home_id: str, kind: str) -> Iterator[Event]:
        rng, version, seq = self.rng, 0, 0

        def fact(cls: type[Event], payload: Any, correlation_id: uuid.UUID | None = None) -> Event:
            nonlocal version
            version += 1
            self.clock += timedelta(milliseconds=1)
            return cls(  # type: ignore[call-arg]
                event_id=uuid.UUID(int=rng.getrandbits(128), version=4),
                device_id=device_id,
                home_id=home_id,
                version=version,
                occurred_at=self.clock,
                recorded_at=self.clock,
                correlation_id=correlation_id,
                payload=payload,
            )

        yield fact(DeviceRegistered, DeviceRegisteredPayload(device_type=kind, name=device_id))
        if self.credentials:
            secret = f"{rng.getrandbits(128):032x}"
            issued = CredentialsIssuedPayload(
                credential_id=uuid.UUID(int=rng.getrandbits(128), version=4),
                password_hash=hash_secret(secret, salt=rng.randbytes(12)),
                issued_at=self.clock,
            )
            yield fact(DeviceCredentialsIssued, issued)
        while True:
            draw = rng.random()
            if draw < 0.01:  # a command, accepted, dispatched, acknowledged, reported, converged
                command_id = uuid.UUID(int=rng.getrandbits(128), version=4)
                desired, name, setting = (
                    ({"target_c": rng.randrange(36, 50) / 2}, "set_target_temperature", "target")
                    if kind == "thermostat"
                    else ({"lock_state": rng.choice(("locked", "unlocked"))}, "lock", "lock")
                )
                expires = self.clock + timedelta(minutes=5)
                params = desired if kind == "thermostat" else {}
                requested = CommandRequestedPayload(
                    command_id=command_id, name=name, params=params, expires_at=expires
                )
                ref = CommandRef(command_id=command_id)
                yield fact(CommandRequested, requested, command_id)
                yield fact(CommandAccepted, ref, command_id)
                wanted = DesiredSetPayload(command_id=command_id, desired=desired, setting=setting)
                yield fact(DesiredStateSet, wanted, command_id)
                yield fact(CommandDispatched, ref, command_id)
                yield fact(CommandAcknowledged, ref, command_id)
                seq += 1
                yield fact(
                    StateReported,
                    StateReportedPayload(reported=desired, device_seq=seq, device_time=self.clock),
                )
                yield fact(CommandConverged, ref, command_id)
            elif draw < 0.012:
                value = round(rng.uniform(30, 40), 1)
                yield fact(
                    AnomalyDetected,
                    AnomalyDetectedPayload(
                        metric="ambient_c",
                        value=value,
                        score=4.2,
                        threshold=3.0,
                        model_version=1,
                        device_time=self.clock,
                    ),
                )
            elif draw < 0.013:
                yield fact(DeviceWentOffline, ConnectivityPayload(last_seen=self.clock))
                yield fact(DeviceCameOnline, ConnectivityPayload(last_seen=self.clock))
            else:
                seq += 1
                reading: dict[str, Any] = (
                    {
                        "ambient_c": round(rng.uniform(18, 24), 1),
                        "humidity_pct": round(rng.uniform(30, 60), 1),
                    }
                    if kind == "thermostat"
                    else {"battery_pct": rng.randrange(20, 100), "door": "closed"}
                )
                yield fact(
                    StateReported,
                    StateReportedPayload(reported=reading, device_seq=seq, device_time=self.clock),
                )


async def fill_journal(
    settings: StackSettings,
    facts: Iterator[Event],
    events: int,
    on_progress: Callable[[int], None] = lambda n: None,
) -> None:
    """Append the next ``events`` facts to the journal, in full record batches per partition (several
    in flight), keyed by device_id like the device actor's."""
    topic = settings.topics.journal
    producer = make_producer(settings.kafka_bootstrap_servers, "bench-fill", linger_ms=50)
    await producer.start()
    try:
        partitions = sorted(await producer.partitions_for(topic))
        partition_of: dict[str, int] = {}
        batches = {p: producer.create_batch() for p in partitions}
        in_flight: list[asyncio.Future[Any]] = []

        async def send(p: int) -> None:
            in_flight.append(await producer.send_batch(batches[p], topic, partition=p))
            batches[p] = producer.create_batch()
            if len(in_flight) > 4 * len(partitions):
                await asyncio.gather(*in_flight[: len(partitions)])
                del in_flight[: len(partitions)]

        for n in range(events):
            event = next(facts)
            key = event.device_id.encode()
            p = partition_of.get(event.device_id)
            if p is None:
                p = partition_of[event.device_id] = DefaultPartitioner()(key, partitions, partitions)
            value = encode(event)
            if batches[p].append(key=key, value=value, timestamp=None) is None:
                await send(p)
                batches[p].append(key=key, value=value, timestamp=None)
            if n % 20_000 == 0:
                on_progress(n)
        for p in partitions:
            if batches[p].record_count():
                await send(p)
        await asyncio.gather(*in_flight)
        on_progress(events)
    finally:
        await producer.stop()
