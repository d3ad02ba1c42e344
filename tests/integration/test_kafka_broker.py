"""The local Kafka broker: a real Kafka 4.x from Maven Central, started, used, stopped and restarted."""

from __future__ import annotations

import socket
import uuid
from collections import defaultdict
from pathlib import Path

import psutil
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.kafka_probe import kafka_answers
from hearth_devstack.supervision.ports import free_port
from hearth_devstack.supervision.process import ManagedProcess, StartupError
from hearth_shared.adapters.kafka import ensure_topics, wait_until_every_broker_knows
from hearth_shared.adapters.topics import Topics
from tests.support.topics import produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def start(broker: KafkaBroker) -> ManagedProcess:
    proc = broker.process()
    proc.start()
    proc.wait_healthy(60)
    return proc


def java_processes_of(broker: KafkaBroker) -> list[psutil.Process]:
    config = str(broker.config_path)
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if config in (p.info["cmdline"] or []):
            found.append(p)
    return found


@pytest.fixture
def broker(tmp_path: Path) -> KafkaBroker:
    return KafkaBroker(
        data_dir=tmp_path / "kafka", log_dir=tmp_path / "logs", port=free_port(), controller_port=free_port()
    )


async def consume_all(bootstrap: str, topic: str, count: int) -> list[tuple[str, str]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"g{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        got: list[tuple[str, str]] = []
        while len(got) < count:
            batches = await consumer.getmany(timeout_ms=10_000)
            assert batches, f"no records within 10 s after {len(got)} of {count}"
            got += [(r.key.decode(), r.value.decode()) for rs in batches.values() for r in rs]
        return got
    finally:
        await consumer.stop()


def by_key(records: list[tuple[str, str]]) -> dict[str, list[str]]:
    grouped = defaultdict(list)
    for key, value in records:
        grouped[key].append(value)
    return dict(grouped)


async def test_topics_produce_consume_and_clean_stop(broker: KafkaBroker) -> None:
    proc = start(broker)
    try:
        assert kafka_answers(broker.port)
        topics = Topics(f"t{uuid.uuid4().hex[:8]}")
        await ensure_topics(broker.bootstrap, topics.specs())
        await wait_until_every_broker_knows(broker.bootstrap, [topics.journal, topics.models])
        never_made = f"{topics.journal}-never-made"
        with pytest.raises(TimeoutError, match=never_made):
            await wait_until_every_broker_knows(broker.bootstrap, [topics.journal, never_made], timeout_s=1)

        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            assert never_made not in await admin.list_topics()  # asking for its metadata did not create it
            [journal] = await admin.describe_topics([topics.journal])
            assert len(journal["partitions"]) == 12
            [response] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topics.models)]
            )
            configs = {c[0]: c[1] for c in response.resources[0][4]}
            assert configs["cleanup.policy"] == "compact"
        finally:
            await admin.close()

        sent = [(f"device-{i % 5}", str(i)) for i in range(500)]
        await produce(broker.bootstrap, topics.journal, [(k.encode(), v.encode()) for k, v in sent])
        received = await consume_all(broker.bootstrap, topics.journal, len(sent))
        assert by_key(received) == by_key(sent)  # every record, in order per key
    finally:
        proc.stop()
    assert not proc.running
    assert java_processes_of(broker) == []
    assert not kafka_answers(broker.port)


async def test_restart_keeps_records(broker: KafkaBroker) -> None:
    topic = Topics("restart").journal
    sent = [(f"device-{i % 3}", str(i)) for i in range(100)]
    proc = start(broker)
    try:
        await ensure_topics(broker.bootstrap, [s for s in Topics("restart").specs() if s.name == topic])
        await produce(broker.bootstrap, topic, [(k.encode(), v.encode()) for k, v in sent])
    finally:
        proc.stop()

    proc = start(broker)  # same data dir and ports: no new format
    try:
        assert by_key(await consume_all(broker.bootstrap, topic, len(sent))) == by_key(sent)
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        await consumer.start()
        try:
            ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(12)])
            assert sum(ends.values()) == len(sent)  # nothing written twice
        finally:
            await consumer.stop()
    finally:
        proc.stop()


def test_port_taken_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = KafkaBroker(data_dir=tmp_path, log_dir=tmp_path, port=port, controller_port=free_port())
        with pytest.raises(StartupError, match=f"port {port} is already taken"):
            broker.process()
