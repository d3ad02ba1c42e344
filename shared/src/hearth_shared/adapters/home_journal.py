"""The home journal's Kafka adapter: append home facts (keyed by home_id, so a home's facts keep their
order in one partition). Reading it is ``hearth_shared.adapters.topic_follower``'s job."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka import AIOKafkaProducer

from hearth_shared.adapters.topics import Topics
from hearth_shared.domain.home_facts import HomeFact, encode_home_fact


async def append_home_fact(producer: AIOKafkaProducer, topics: Topics, fact: HomeFact) -> None:
    """Append one fact; returns once the broker has it (acks=all)."""
    await append_home_facts(producer, topics, (fact,))


async def append_home_facts(producer: AIOKafkaProducer, topics: Topics, facts: Iterable[HomeFact]) -> None:
    """Append facts in their order (a home's facts share a partition); returns once the broker has every
    one (acks=all), raises if one could not be written."""
    futures = [
        await producer.send(topics.home_journal, encode_home_fact(f), key=f.home_id.encode()) for f in facts
    ]
    await asyncio.gather(*futures)
