"""``TopicWriter`` (the port in ``hearth_command_api.service.ports``) on Kafka: one producer for every write
of the API. Each write returns once the broker has it (the producer's acks=all), and goes through
``KafkaWriter.produce``, which replaces a producer whose sequence the broker lost."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from hearth_shared.adapters.home_journal import append_home_fact
from hearth_shared.adapters.kafka import KafkaWriter
from hearth_shared.adapters.revocations import publish_revocation
from hearth_shared.domain.home_facts import HomeFact
from hearth_shared.schema.campaign_events import CampaignRequest, encode_campaign_record
from hearth_shared.schema.events import Inbound
from hearth_shared.schema.revocations import TokenRevoked


class KafkaTopicWriter(KafkaWriter):
    """Requests to the inbox, revocations to ``hearth.token-revocations``, home facts to the home journal,
    campaign requests to ``campaign-requests``."""

    async def send_request(self, request: Inbound) -> None:
        await self.send_requests(request)

    async def revoke(self, fact: TokenRevoked) -> None:
        await self.produce(lambda producer: publish_revocation(producer, self.topics, fact))

    async def append_home(self, fact: HomeFact) -> None:
        await self.produce(lambda producer: append_home_fact(producer, self.topics, fact))

    async def request_campaign(self, key: str, request: CampaignRequest) -> None:
        value = encode_campaign_record(request)

        async def send(producer: AIOKafkaProducer) -> None:
            await producer.send_and_wait(self.topics.campaign_requests, value, key=key.encode())

        await self.produce(send)
