"""The scheduler's and the engine's effects on Kafka (their ports ``scheduler.CommandPath``,
``effect_batch.EnginePath`` and the notifier's ``FactSink``): command requests on the inbox (the command
API's path, the same ``KafkaWriter.send_requests``), their own facts on the home journal. Each returns
once the broker has every item (the producer's acks=all) and raises if any could not be written; every
write goes through ``KafkaWriter.produce``, which replaces a producer whose sequence the broker lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from hearth_shared.adapters.home_journal import append_home_fact, append_home_facts
from hearth_shared.adapters.kafka import KafkaWriter
from hearth_shared.domain.home_facts import HomeFact
from hearth_shared.schema.events import SubmitCommand


class KafkaCommandPath:
    """One at a time (the scheduler, the notifier) or many at once (the engine's flush: sent together,
    then awaited)."""

    def __init__(self, writer: KafkaWriter) -> None:
        self.writer = writer

    async def send_request(self, request: SubmitCommand) -> None:
        await self.writer.send_requests(request)

    async def append(self, fact: HomeFact) -> None:
        await self.writer.produce(lambda producer: append_home_fact(producer, self.writer.topics, fact))

    async def send_requests(self, requests: Sequence[SubmitCommand]) -> None:
        await self.writer.send_requests(*requests)

    async def append_all(self, facts: Sequence[HomeFact]) -> None:
        await self.writer.produce(lambda producer: append_home_facts(producer, self.writer.topics, facts))
