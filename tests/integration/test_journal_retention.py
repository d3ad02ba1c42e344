"""Journal retention as a setting, on a real broker: the journal is created with it (for ever by default),
a changed setting is applied to an existing journal with its other configs kept, and `hearth up`'s
warning names the archive's lag when a window is set while the archive lags."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from hearth_devstack.local import retention_warning
from hearth_devstack.servers.kafka import KafkaBroker
from hearth_shared.adapters.kafka import apply_topic_config, ensure_topics
from hearth_shared.adapters.settings import StackSettings
from tests.support.archive import produce, readings
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        [(_code, _message, _type, _name, entries)] = response.resources
        return {entry[0]: entry[1] for entry in entries}
    finally:
        await admin.close()


async def test_journal_retention_setting_is_applied_and_warned_about(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}"
    forever = StackSettings(kafka_bootstrap_servers=kafka.bootstrap, topic_prefix=prefix)
    await ensure_topics(kafka.bootstrap, forever.topics.specs())
    journal = forever.topics.journal
    assert (await topic_configs(kafka.bootstrap, journal))["retention.ms"] == "-1"

    window = forever.model_copy(update={"journal_retention_s": 3 * 24 * 3600})
    await apply_topic_config(kafka.bootstrap, window.topics.journal_spec())

    async def applied() -> bool:
        return (await topic_configs(kafka.bootstrap, journal))["retention.ms"] == str(3 * 24 * 3600 * 1000)

    await eventually(applied, "the journal's new retention", timeout_s=30, every_s=0.5)
    configs = await topic_configs(kafka.bootstrap, journal)
    assert configs["min.insync.replicas"] == "1"  # the journal's other configs are kept

    await produce(forever, readings(devices=2, per_device=3))
    assert await asyncio.to_thread(retention_warning, forever, tmp_path / "archive") is None  # kept for ever
    warning = await asyncio.to_thread(retention_warning, window, tmp_path / "archive")  # nothing archived
    assert warning is not None and "lags it by 6 facts" in warning and "259200 s" in warning
