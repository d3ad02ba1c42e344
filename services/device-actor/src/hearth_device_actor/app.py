"""The device actor's composition root: ``make_app(settings, *, journal=None)`` builds the faust app.

The twins live in a faust table keyed by device_id whose changelog is partitioned by the same murmur2
key hash as the inbox (``TwinTable``, adapters/twin_table.py), so the table stays co-partitioned with the
inbox and the journal, and the deadline timer can write it too. faust assigns the table's partitions among
the workers and recovers them; once it has, the ``InboxFeed`` (entrypoints/inbox.py) reads the inbox
partitions with the same numbers, in batches, with its own consumer (see there for why not through a faust
agent). Records stay bytes until the actors decode them, once, at the edge. What the worker serves
(joining, rebalancing, or the partitions it reads) goes to its serving file at each change and every
second, which its health check reads (adapters/serving.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer
from mode import Service

from hearth_device_actor.adapters.catch_up import JournalCatchUp
from hearth_device_actor.adapters.kafka_outbox import KafkaOutbox
from hearth_device_actor.adapters.keep_fetching import fetch_nothing, period_s
from hearth_device_actor.adapters.serving import WRITE_EVERY_S, ServingFile, serving_file
from hearth_device_actor.adapters.twin_table import TwinTable
from hearth_device_actor.entrypoints.inbox import InboxFeed, inbox_consumer
from hearth_device_actor.service.actor import DeviceActors, JournalGap
from hearth_device_actor.settings import DeviceActorSettings
from hearth_shared.adapters.kafka import KafkaWriter, ensure_topics
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.task_dump import dump_tasks_on_sigusr1
from hearth_shared.adapters.topic_follower import TopicFollower
from hearth_shared.adapters.topics import PARTITIONS, TopicSpec, replica_config
from hearth_shared.schema.events import decode_model

log = logging.getLogger(__name__)

CHANGELOG_LINGER_S = 0.02  # the most an inbox commit's flush waits for the last changelog writes


async def declare_changelog(app: faust.App, stack: StackSettings) -> None:
    """Create the twins' changelog topic as faust would (compacted, partitioned like the inbox) and wait
    until every broker knows it and the inbox's lanes (``ensure_topics``), before the worker joins its
    group: a worker that joins while a broker does not know the changelog yet is assigned nothing, for
    good (see ``wait_until_every_broker_knows``)."""
    topic = app.tables["twins"].changelog_topic
    config = {"cleanup.policy": "compact", **(topic.config or {})}
    changelog = TopicSpec(topic.get_topic_name(), PARTITIONS, config, stack.kafka_replication_factor)
    lanes = [s for s in stack.topics.specs() if s.name in stack.topics.inbox_lanes]
    await ensure_topics(stack.kafka_bootstrap_servers, [changelog, *lanes])


def make_app(  # noqa: C901  (mccabe adds up the nested services and handlers wired here; each is flat)
    settings: DeviceActorSettings | None = None, *, journal: KafkaWriter | None = None
) -> faust.App:
    settings = settings or DeviceActorSettings()
    stack = settings.stack
    topics = stack.topics
    # No producer linger: ``KafkaOutbox.send`` queues a whole batch's facts and device commands at once
    # (``send_batched``), so they leave in one produce request without waiting.
    kafka_journal = journal or KafkaWriter(
        stack.kafka_bootstrap_servers, topics, client_id="device-actor", linger_ms=0
    )
    app = faust.App(
        f"{settings.app_id}-{stack.topic_prefix}",
        broker=f"kafka://{stack.kafka_bootstrap_servers}",
        store="memory://",
        datadir=settings.data_dir,
        topic_partitions=PARTITIONS,
        topic_replication_factor=stack.kafka_replication_factor,  # the twins changelog faust creates
        topic_allow_declare=True,
        topic_disable_leader=True,
        web_enabled=False,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.session_timeout_s / 4),
        consumer_group_instance_id=settings.instance,  # static membership when set (see the settings)
        broker_max_poll_interval=settings.max_poll_interval_s,  # kept by fetch_nothing (keep_fetching.py)
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        # faust's producer writes only the twins' changelog, which nothing waits for until the inbox
        # commit flushes it (every ``broker_commit_interval``): lingering gathers the changelog writes of
        # several batches into one produce request instead of one (or more) per batch.
        producer_linger=CHANGELOG_LINGER_S,
        broker_commit_interval=0.5,
        table_cleanup_interval=3600.0,
        table_standby_replicas=0,  # with standbys, faust 0.15.3 lost changelog writes (see the recovery test)
        broker_request_timeout=max(30.0, settings.session_timeout_s * 4),
        logging_config=None,
    )

    twins = TwinTable(
        app,
        name="twins",
        default=None,
        partitions=PARTITIONS,
        key_type=bytes,
        value_type=bytes,
        extra_topic_configs=replica_config(stack.kafka_replication_factor),
    )
    app.tables.add(twins)
    serving = ServingFile(
        serving_file(settings.data_dir),
        group=app.conf.id,
        changelog=twins.changelog_topic.get_topic_name(),
        partitions=PARTITIONS,
    )
    actors = DeviceActors(
        twins,
        KafkaOutbox(kafka_journal),
        offline_after_s=settings.offline_after_s,
        check_commands_s=settings.check_commands_ms / 1000,
    )
    lock = asyncio.Lock()
    feed = InboxFeed(
        lambda: inbox_consumer(stack.kafka_bootstrap_servers, f"{app.conf.id}-inbox"),
        topics.inbox_lanes,
        actors.handle_batch,
        lambda: app.producer.flush(),
        lock,
        batch_size=settings.batch_size,
        coalesce_after=settings.coalesce_after,
        fetch_waits_ms=(settings.fetch_wait_ms, settings.idle_fetch_wait_ms),
        journal_topic=topics.journal,
        catch_up=JournalCatchUp(
            lambda: AIOKafkaConsumer(
                bootstrap_servers=stack.kafka_bootstrap_servers,
                enable_auto_commit=False,
                auto_offset_reset="earliest",  # an offset retention removed: from the oldest fact kept
                max_partition_fetch_bytes=4 * 1024 * 1024,
            ),
            topics.journal,
            actors.catch_up,
        ).run,
    )

    @app.service
    class JournalProducer(Service):  # started with the worker, stopped with it
        async def on_start(self) -> None:
            await kafka_journal.start()

        async def on_stop(self) -> None:
            await kafka_journal.stop()

    @app.service
    class ModelFeed(Service):  # every worker reads every model version (no group); the topic is compacted
        async def on_start(self) -> None:
            self.follower = TopicFollower(
                stack.kafka_bootstrap_servers, [topics.models], self._use, "device-actor-models"
            )
            await self.follower.start()

        async def on_stop(self) -> None:
            await self.follower.stop()

        async def _use(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
            actors.use_model(decode_model(value))  # unreadable: the follower logs it and skips it

    @app.service
    class ServingHeartbeat(Service):  # the serving file, fresh every second (adapters/serving.py)
        async def on_start(self) -> None:
            serving.write()

        @Service.timer(WRITE_EVERY_S)
        async def _write(self) -> None:
            if feed.serving:
                serving.lag = await feed.lags()
            serving.coalesced_reports = actors.coalesced.reports
            serving.late_reports = actors.late_reports
            serving.unknown_device_requests = actors.unknown_device_requests
            serving.write()

    fetch_every_s = period_s(settings.max_poll_interval_s)

    @app.service
    class KeepInTheGroup(Service):  # faust's consumer never fetches by itself (adapters/keep_fetching.py)
        @Service.timer(fetch_every_s)
        async def _fetch(self) -> None:
            await fetch_nothing(app)

    @app.service
    class Inbox(Service):  # the hot path: the inbox in batches, for the partitions the table holds
        async def on_start(self) -> None:
            await feed.start()

        async def on_stop(self) -> None:
            await feed.stop()

        @Service.task
        async def _read(self) -> None:
            await feed.run()

    async def on_recovered(partitions: set[int]) -> None:
        try:
            await feed.assign(partitions)
        except JournalGap as gap:  # its twins are not the journal's: it must not decide from them
            log.critical("%s; the worker stops (its restart recovers the twins again)", gap)
            await app.crash(gap)
            return
        async with lock:
            actors.rescan()  # the deadlines of the twins this worker holds now
        serving.serve(partitions)  # recovered, caught up with the journal, read: it serves them

    twins.on_recovered = on_recovered

    @app.on_partitions_revoked.connect  # mode's handler shape: sender, the revoked set, signal=
    async def on_revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        serving.rebalancing()  # it stops serving now, not once the batch in hand is done
        await feed.revoke()
        async with lock:
            actors.deadlines.clear()

    # The task and the timer are registered by calling faust's decorators (untyped) rather than by
    # decorating, so the functions keep their types under mypy --strict.
    async def install_task_dump() -> None:  # `kill -USR1 <pid>`: what every task is waiting on
        dump_tasks_on_sigusr1()

    ticks = 0

    app.task(install_task_dump)

    async def deadlines() -> None:
        nonlocal ticks
        ticks += 1
        await actors.check_deadlines(lock, settings.tick_chunk)
        if ticks % 20 == 0 and actors.batches:
            log.info(
                "handled %d inbox records in %d batches (%.0f per batch); %d twins with deadlines; "
                "%d state reports coalesced in %d batches; %d overtaken whole or redelivered (no fact); "
                "%d for devices not registered (no fact)",
                actors.processed,
                actors.batches,
                actors.processed / actors.batches,
                len(actors.deadlines),
                actors.coalesced.reports,
                actors.coalesced.batches,
                actors.late_reports,
                actors.unknown_device_requests,
            )

    app.timer(interval=settings.tick_interval_s)(deadlines)
    app.actors = actors  # type: ignore[attr-defined]  # for benchmarks and tests in-process
    return app
