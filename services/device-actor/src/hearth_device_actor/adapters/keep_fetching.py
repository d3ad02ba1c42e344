"""Keeps faust's consumer in its group although no agent makes it fetch.

The worker's faust consumer exists for one thing: the group that assigns each worker its share of the
twins' partitions (the Inbox service reads the inbox with its own consumer). faust's fetcher asks the
consumer for records only for agents' partitions, and this app has no agent, so the consumer never
fetches. aiokafka counts a member that has not fetched for ``max_poll_interval`` as stuck and leaves the
group without a word, and faust never rejoins: found in CI, where every worker stopped serving 992 s
after it started (faust's default interval being 1000 s), and true of any interval, so a worker that
runs for years needs a fetch.

``fetch_nothing`` is that fetch: every ``max_poll_interval / 5`` the worker asks the consumer, on faust's
consumer thread as faust's own fetcher does, for the records of a partition no worker is assigned. aiokafka
counts the call as a fetch (its fetch context ends, which is all its idle clock reads) and it returns
nothing, so no record of a real partition is taken from faust. faust has no public call for this: the
consumer thread (``consumer._thread``) is faust's, reached once, here.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.types import TP

NOWHERE = TP("hearth.keep-fetching.none", 0)  # a partition that no member is ever assigned
SHARE_OF_INTERVAL = 5  # fetches per max_poll_interval: four may be missed (a rebalance) and still in time


def period_s(max_poll_interval_s: float) -> float:
    return max_poll_interval_s / SHARE_OF_INTERVAL


async def fetch_nothing(app: faust.App) -> None:
    """One fetch of nothing on faust's consumer thread (see the module); skipped while faust has no
    consumer thread yet (before the worker started)."""
    thread: Any = getattr(app.consumer, "_thread", None)
    if thread is not None:
        await thread.getmany({NOWHERE}, 0.0)
