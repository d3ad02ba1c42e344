"""Poison records on every topic, planted straight into Kafka past every edge: each becomes a dead letter
with its reason (bounded in size, whatever the record's size) or a logged skip, and processing goes on:
the projector projects later facts, a rebuild completes, the device actor decides later requests, the
command API's device book follows the journal, and every part's process stays alive."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import msgspec
import pytest
from aiokafka import AIOKafkaConsumer

from hearth_read_models.projection import projector as projector_module
from hearth_read_models.rebuild.run import rebuild
from hearth_shared.adapters.kafka import MAX_DEAD_LETTER_BYTES, VALUE_EXCERPT_BYTES
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.events import (
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    CommandRequestedPayload,
    DeviceRegistered,
    DeviceRegisteredPayload,
    RegisterDevice,
    ReportState,
    StateReported,
    StateReportedPayload,
    SubmitCommand,
    decode_event,
    encode,
    new_id,
    utcnow,
)
from tests.integration.test_command_lifecycle import register
from tests.integration.test_projector import (
    T0,
    Device,
    caught_up,
    every_fact_type,
    produce,
    produce_facts,
    query,
    running_projector,
)
from tests.integration.test_rebuild import settings_for
from tests.support.commands import final_command, send
from tests.support.device_link import DeviceLink
from tests.support.platform import Platform
from tests.support.waiting import eventually, twin_when

pytestmark = pytest.mark.integration

BIG = 900 * 1024  # random bytes: once larger than a dead letter could be
Record = tuple[bytes | None, bytes | None]


def random_bytes(size: int = BIG) -> bytes:
    return b"\xff" + os.urandom(size - 1)  # never valid JSON, whatever the random bytes are


Letters = list[tuple[int, dict[str, Any]]]  # (the record's size, the letter)


async def read_dead_letters(
    settings: StackSettings, enough: Callable[[Letters], bool], timeout_s: float = 60
) -> Letters:
    """The dead-letter topic from its start until ``enough`` holds for what was read."""
    consumer = AIOKafkaConsumer(
        settings.topics.dead_letters,
        bootstrap_servers=settings.kafka_bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    letters: Letters = []
    try:

        async def read_enough() -> bool:
            batch = await consumer.getmany(timeout_ms=500)
            letters.extend(
                (len(r.value or b""), msgspec.json.decode(r.value)) for rs in batch.values() for r in rs
            )
            return enough(letters)

        if not enough(letters):
            await eventually(
                read_enough, "enough dead letters", timeout_s=timeout_s, every_s=0, shown=letters.__len__
            )
    finally:
        await consumer.stop()
    return letters


def assert_bounded(size: int, letter: dict[str, Any], value_size: int) -> None:
    """The letter of an oversized record: an excerpt, the whole size, and never more than may be sent."""
    assert size < MAX_DEAD_LETTER_BYTES
    assert (letter["value_size"], letter["value_truncated"]) == (value_size, True)
    assert 0 < len(letter["value"]) <= VALUE_EXCERPT_BYTES


# ------------------------------------------------------------------------ the projector and a rebuild


def journal_poison(home: str) -> tuple[list[tuple[Record, str]], Device]:
    """Records past every edge, each with the reason its dead letter must give; and a device whose
    good facts surround its poison ones (its twin must have the good ones only)."""
    victim = Device(f"{home}-victim", home)
    nul, huge = Device(f"{home}-nul", home), Device(f"{home}-huge", home)
    spaced = Device(f"{home} spaced", home)
    command = uuid.uuid4()

    def fact(device: Device, cls: type[Any], payload: Any, correlation: uuid.UUID | None = None) -> Record:
        return device.device_id.encode(), encode(device(cls, payload, correlation))

    def report(state: dict[str, Any], seq: int) -> Record:
        return fact(
            victim, StateReported, StateReportedPayload(reported=state, device_seq=seq, device_time=T0)
        )

    thermostat = "thermostat"
    registered = DeviceRegisteredPayload(device_type=thermostat, name="Hall")
    requested = CommandRequestedPayload(
        command_id=command, name="set_target_temperature", params={"target_c": "2\u00001"}, expires_at=T0
    )
    rejected = CommandRejectedPayload(command_id=command, reason="out\u0000of_range", message="no")
    planted = [
        (fact(nul, DeviceRegistered, DeviceRegisteredPayload(device_type=thermostat, name="front\u0000door")),
         "unstorable_value"),
        (fact(victim, DeviceRegistered, registered), ""),
        (report({"hvac_mode": "he\u0000at"}, 1), "unstorable_value"),
        (fact(victim, CommandRequested, requested, command), "unstorable_value"),
        (fact(victim, CommandRejected, rejected, command), "unstorable_value"),
        (report({"ambient_c": 2**70}, 2), "unstorable_value"),
        (report({"ambient_c": 20.5}, 3), ""),
        ((b"poison-random", random_bytes()), "invalid_json"),
        ((b"poison-deep", b"[" * 200_000 + b"]" * 200_000), "too_deep"),
        ((b"poison-tombstone", None), "no_value"),
        ((b"poison-nan", b'{"type": "device.registered", "version": NaN}'), "invalid_json"),
        ((b"poison-type", b'{"type": "device.registered", "version": "one"}'), "invalid_fields"),
        ((huge.device_id.encode(), encode(msgspec.structs.replace(  # beyond PostgreSQL's bigint
            huge(DeviceRegistered, registered), version=2**63))), "out_of_range"),
        (fact(spaced, DeviceRegistered, registered), "invalid_identifier"),
    ]  # fmt: skip
    return planted, victim


ROLLUP_KEY = "device:th-1:1m:2026-11-22T10:15:00Z"
ROLLUP_POISON: list[tuple[Record, str]] = [
    ((ROLLUP_KEY.encode(), random_bytes()), "invalid_rollup_value"),
    (("device:th\u00001:1m:2026-11-22T10:15:00Z".encode(), b"{}"), "invalid_rollup_key"),
    ((ROLLUP_KEY.encode(), b'{"scope": "dev\\u0000ice"}'), "invalid_rollup_value"),
    ((ROLLUP_KEY.encode(), b'{"scope": "device", "readings": 2}'), ""),  # the good one, last
]


async def test_poison_facts_are_dead_letters_and_the_views_and_a_rebuild_go_on(stack: StackSettings) -> None:
    settings = settings_for(stack)
    schema, home = settings.schema_name, f"h-{stack.topic_prefix}"
    planted, victim = journal_poison(home)
    later, commands = every_fact_type(home)  # devices that come after the poison
    await produce(stack, stack.topics.journal, [record for record, _ in planted])
    await produce(stack, stack.topics.rollups, [record for record, _ in ROLLUP_POISON])
    await produce_facts(stack, later)
    poison = [reason for _, reason in planted + ROLLUP_POISON if reason]

    async with running_projector(stack, schema) as projector:
        await caught_up(projector)
        assert projector.stats.dead_letters == len(poison)
    letters = await read_dead_letters(stack, lambda read: len(read) >= len(poison))
    assert sorted(letter["reason"] for _, letter in letters) == sorted(poison)
    assert all(letter["consumer"] == "test-projector" and letter["detail"] for _, letter in letters)
    oversized = [(size, letter) for size, letter in letters if letter["value_size"] == BIG]
    assert len(oversized) == 2  # the journal's and the rollups'
    for size, letter in oversized:
        assert_bounded(size, letter, BIG)
    [nul] = [letter for _, letter in letters if letter["key"] == f"{home}-nul"]
    assert "payload.name" in nul["detail"] and "front\\u0000door" in nul["value"]

    def views() -> dict[str, Any]:
        return dict(query(stack.postgres_dsn, f"SELECT device_id, view FROM {schema}.twins"))

    twins = views()
    assert set(twins) == {victim.device_id, f"{home}-th", f"{home}-lock"}  # no poison device
    assert twins[victim.device_id]["version"] == 6  # its good facts: 1 and 6
    assert twins[victim.device_id]["reported"]["ambient_c"] == 20.5
    assert "hvac_mode" in twins[victim.device_id]["reported"]  # the thermostat's initial state, not "he\0at"
    [(status,)] = query(
        stack.postgres_dsn,
        f"SELECT status FROM {schema}.commands WHERE command_id = %s",
        commands["converged"],
    )
    assert status == "converged"  # a later device's command converged in the views
    [(value,)] = query(stack.postgres_dsn, f"SELECT value FROM {schema}.rollups")
    assert value == {"scope": "device", "readings": 2}

    result = await rebuild(settings, batch_size=7)  # several batches: the poison lands among good records
    assert result.swapped and all(c.ok for c in result.checks), result
    assert result.skipped == len(poison)
    assert views() == twins  # the rebuilt views equal the live ones: the same records skipped


async def test_a_record_postgres_refuses_past_the_checks_costs_only_that_record(
    stack: StackSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The projector's backstop: were the storable check to miss a value, PostgreSQL's refusal of it
    makes that record a dead letter and the rest of its batch is projected."""
    monkeypatch.setattr(projector_module, "decode_fact", decode_event)  # no check: PostgreSQL judges
    schema, home = settings_for(stack).schema_name, f"h-{stack.topic_prefix}"
    nul = Device(f"{home}-nul", home)
    registered = DeviceRegisteredPayload(device_type="thermostat", name="front\u0000door")
    later, commands = every_fact_type(home)
    await produce_facts(stack, [later[0], nul(DeviceRegistered, registered), *later[1:]])  # one batch
    async with running_projector(stack, schema) as projector:
        await caught_up(projector)
        assert projector.stats.dead_letters == 1
    [(_, letter)] = await read_dead_letters(stack, lambda read: len(read) >= 1)
    assert (letter["reason"], letter["key"], letter["consumer"]) == (
        "refused_by_postgres",
        nul.device_id,
        "test-projector",
    )
    twins = dict(query(stack.postgres_dsn, f"SELECT device_id, version FROM {schema}.twins"))
    assert twins == {f"{home}-th": 26, f"{home}-lock": 8}
    [(status,)] = query(
        stack.postgres_dsn,
        f"SELECT status FROM {schema}.commands WHERE command_id = %s",
        commands["converged"],
    )
    assert status == "converged"


# --------------------------------------------------------------------- the running platform's parts


@pytest.fixture
async def device(platform: Platform) -> AsyncIterator[DeviceLink]:
    async with DeviceLink(platform.settings) as link:
        yield link


def request_records(home: str, device_id: str, tag: str) -> list[tuple[bytes, bytes, str]]:
    """Inbox requests that decode but are unusable (keyed by a marker to find their dead letters),
    for the registered ``device_id``, with the reason each dead letter must give."""
    now = utcnow()

    def register_(**fields: Any) -> bytes:
        base: dict[str, Any] = {
            "request_id": new_id(), "device_id": f"{tag}-dev", "sent_at": now, "home_id": home,
            "device_type": "thermostat", "name": "ok",
        }  # fmt: skip
        return encode(RegisterDevice(**{**base, **fields}))

    def report(state: dict[str, Any]) -> bytes:
        return encode(
            ReportState(
                request_id=new_id(), device_id=device_id, sent_at=now, device_seq=10**6, device_time=now,
                state=state,
            )
        )  # fmt: skip

    def submit(name: str, params: dict[str, Any]) -> bytes:
        return encode(
            SubmitCommand(
                request_id=new_id(), device_id=device_id, sent_at=now, home_id=home, command_id=uuid.uuid4(),
                name=name, params=params, expires_at=now + timedelta(seconds=30),
            )
        )  # fmt: skip

    return [
        (b"random", random_bytes(), "too_large"),
        (b"garbage", random_bytes(1000), "invalid_json"),
        (b"nul-name", register_(name="front\u0000door"), "unstorable_value"),
        (b"bell-name", register_(name="ding\x07"), "unstorable_value"),
        (b"bad-id", register_(device_id="front door"), "invalid_identifier"),
        (b"bad-home", register_(home_id="home/1"), "invalid_identifier"),
        (b"toaster", register_(device_type="toaster"), "unknown_device_type"),
        (b"nested-state", report({"ambient_c": {"celsius": 20}}), "wrong_type"),
        (b"list-state", report({"ambient_c": [20]}), "wrong_type"),
        (b"huge-state", report({"ambient_c": 2**70}), "unstorable_value"),
        (b"nul-state", report({"hvac_mode": "he\u0000at"}), "unstorable_value"),
        (b"nul-params", submit("set_target_temperature", {"target_c": "2\u00001"}), "unstorable_value"),
        (b"bad-command", submit("set target", {}), "invalid_command_name"),
        (b"inf", b'{"kind": "report_state", "device_id": "x", "state": {"a": 1e999}}', "invalid_json"),
        (b"deep", b'{"kind": "report_state", "state": ' + b"[" * 20_000 + b"]" * 20_000 + b"}", "too_deep"),
    ]  # fmt: skip


async def test_poison_on_every_topic_stops_no_part_of_the_platform(
    platform: Platform, device: DeviceLink
) -> None:
    home = f"home-{uuid.uuid4().hex[:8]}"
    tag = f"poison-{uuid.uuid4().hex[:8]}"
    topics, producer = platform.settings.topics, device.writer.producer
    async with (
        platform.client(platform.command_api, home) as api,
        platform.client(platform.query_api, home) as qa,
    ):
        victim = await register(api, home, "thermostat")
        await device.report(victim, {"ambient_c": 19.0, "hvac_mode": "heat"})
        await twin_when(qa, victim, lambda t: t["connectivity"]["online"])

        # the inbox: unusable requests (the device actor)
        requests = request_records(home, victim, tag)
        for key, value, _ in requests:
            await producer.send_and_wait(topics.inbox, value, key=f"{tag}-{key.decode()}".encode())
        # the journal: a device name PostgreSQL cannot hold, and random bytes (projector, device book)
        nul = Device(f"{tag}-nul", home)
        registered = DeviceRegisteredPayload(device_type="thermostat", name="front\u0000door")
        await producer.send_and_wait(
            topics.journal, encode(nul(DeviceRegistered, registered)), key=f"{tag}-nul".encode()
        )
        await producer.send_and_wait(topics.journal, random_bytes(), key=f"{tag}-journal".encode())
        # the models (every actor worker logs and skips) and the rollups (projector): garbage, tombstones
        rollup_key = f"device:{tag}:1m:2026-11-22T10:15:00Z".encode()
        for topic, key in ((topics.models, f"{tag}-model".encode()), (topics.rollups, rollup_key)):
            await producer.send_and_wait(topic, random_bytes(), key=key)
            await producer.send_and_wait(topic, None, key=key)

        # every part goes on: a later device's command converges through all of them
        later = await register(api, home, "thermostat")
        await device.report(later, {"ambient_c": 19.0, "hvac_mode": "heat", "target_c": 19.0})
        sent = await send(api, later, "set_target_temperature", {"target_c": 21.5})
        assert sent.status_code == 202, sent.text
        dispatched = await device.next_command(later)
        await device.ack(later, dispatched.command_id)
        await device.report(later, {"target_c": 21.5})
        assert (await final_command(qa, sent.json()["command_id"]))["status"] == "converged"
        waited = (await send(api, later, "set_hvac_mode", {"mode": "cool"}, wait="dispatched")).json()
        assert (waited["status"], waited["timed_out"]) == ("dispatched", False)  # the device book follows
        victim_twin = (await qa.get(f"/v1/devices/{victim}")).json()
        assert victim_twin["reported"]["ambient_c"] == 19.0  # no poison report reached it
        assert (await qa.get(f"/v1/devices/{tag}-dev")).status_code == 404  # no poison registration did

    wanted = {f"{tag}-{key.decode()}": reason for key, _, reason in requests}
    wanted |= {f"{tag}-journal": "invalid_json", f"{tag}-nul": "unstorable_value"}
    wanted[rollup_key.decode()] = "invalid_rollup_value"

    def mine(read: Letters) -> dict[str, tuple[int, dict[str, Any]]]:
        return {letter["key"]: (size, letter) for size, letter in read if letter["key"] in wanted}

    letters = mine(await read_dead_letters(platform.settings, lambda read: len(mine(read)) == len(wanted)))
    assert {key: letter["reason"] for key, (_, letter) in letters.items()} == wanted
    for bounded in (f"{tag}-random", f"{tag}-journal", rollup_key.decode()):
        assert_bounded(*letters[bounded], BIG)
    consumers = {key: letter["consumer"] for key, (_, letter) in letters.items()}
    assert consumers[f"{tag}-random"] == consumers[f"{tag}-nul-name"] == "device-actor"
    assert consumers[f"{tag}-journal"] == consumers[f"{tag}-nul"] == "read-models-projector"
    assert all(part.running for part in platform.parts.values()), platform.logs()
