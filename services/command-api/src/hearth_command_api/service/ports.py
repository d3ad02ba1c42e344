"""What the command API needs of the outside world, as protocols: the composition root (``make_app``)
wires Kafka in (``adapters.topic_writer.KafkaTopicWriter``, a ``TopicFollower`` of the journal), the unit
tests wire fakes (tests/support/fakes.py).

The routes see only these methods, so a request that reaches them can be checked without a broker, and
nothing in the routes reaches past them to a producer.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from hearth_shared.domain.home_facts import HomeFact
from hearth_shared.schema.campaign_events import CampaignRequest
from hearth_shared.schema.events import Inbound
from hearth_shared.schema.revocations import TokenRevoked


class TopicWriter(Protocol):
    """Where the API's writes go: requests to the inbox (``send_request``: the device actor decides and
    writes the journal, which nothing here writes), token revocations to their compacted topic, home facts
    to the home journal, campaign requests to the campaign driver. Each returns once the broker has it."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send_request(self, request: Inbound) -> None: ...

    async def revoke(self, fact: TokenRevoked) -> None: ...

    async def append_home(self, fact: HomeFact) -> None:
        """A fact about a home (zone, program, resume, automation, webhook) to the home journal."""

    async def request_campaign(self, key: str, request: CampaignRequest) -> None:
        """A request to the campaign driver (``campaign-requests``, keyed by campaign id or version)."""


class RestartShown(Protocol):
    """What a follower's last start read (``TopicFollower.restart``: a ``RestartReport``), as JSON."""

    def as_json(self) -> dict[str, Any]: ...


class CaughtUpFeed(Protocol):
    """A follower of a topic that the health check waits for (the device book's journal feed), and what
    its last start read (shown by the health check)."""

    caught_up: asyncio.Event

    @property
    def restart(self) -> RestartShown: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
