"""The platform as the tests see it: the token secret of the test session, the settings of one test's
topics on the session's servers, and the running services with clients that carry a home's token.

The fixtures that start them are in tests/conftest.py; tests and helpers import these names from here
(a conftest is pytest's to load, not a module to import).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from hearth_devstack.servers.kafka import KafkaBroker
from hearth_devstack.servers.postgres import PostgresServer
from hearth_devstack.servers.redis import RedisServer
from hearth_devstack.supervision.process import ManagedProcess, tail
from hearth_shared.adapters.http_calls import GatedClient
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.auth import create_token

SECRET = secrets.token_urlsafe(24)


def make_settings(
    kafka: KafkaBroker, postgres: PostgresServer, redis: RedisServer, prefix: str
) -> StackSettings:
    return StackSettings(
        kafka_bootstrap_servers=kafka.bootstrap,
        topic_prefix=prefix,
        postgres_dsn=postgres.dsn,
        redis_url=redis.url,
        token_secret=SECRET,
    )


@dataclass
class Platform:
    """The running services of the test session, and how to talk to them."""

    settings: StackSettings
    command_api: str
    query_api: str
    parts: dict[str, ManagedProcess]

    def token(self, home_id: str | None = None) -> str:
        return create_token(SECRET, home_id=home_id, admin=home_id is None)

    def client(self, base: str, home_id: str | None = None) -> GatedClient:
        """A client of one API with the home's token (an admin's without one); gated, so no outage costs
        it its pool (hearth_shared.adapters.http_calls)."""
        return GatedClient(
            base_url=base, headers={"Authorization": f"Bearer {self.token(home_id)}"}, timeout=30.0
        )

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n{tail(p.log_path, 40)}" for name, p in self.parts.items())
