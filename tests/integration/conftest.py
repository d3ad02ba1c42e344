"""The one SparkSession of the test session (local[2], the analytics job's own builder and Kafka jars).

Starting Spark costs 6-30 s on two busy cores, so every analytics test shares it; each test points its
queries at its own topics (the ``stack`` fixture) and its own checkpoint directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from hearth_analytics.settings import AnalyticsSettings
    from hearth_analytics.spark import build_session

    settings = AnalyticsSettings(master="local[2]", shuffle_partitions=2, driver_memory="2g", spark_ui=False)
    session = build_session(settings, "hearth-tests")
    yield session
    session.stop()
