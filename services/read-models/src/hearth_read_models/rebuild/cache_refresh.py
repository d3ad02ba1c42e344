"""After a swap (still under its lock): the Redis twin cache rewritten for the twins whose view the
rebuild changed, and a ``snapshot`` message on their home channels; twins it did not change are not
touched and nothing is published for them."""

from __future__ import annotations

import msgspec
from redis.asyncio import Redis

from hearth_read_models.rebuild.swap import ChangedTwin
from hearth_read_models.store.live_channels import SNAPSHOT, change_message, home_channel, twin_key


async def refresh_cache(redis_url: str, changed: list[ChangedTwin]) -> int:
    """Rewrite (or delete) the cached twins in one MULTI; returns how many."""
    if not changed:
        return 0
    redis = Redis.from_url(redis_url)
    try:
        async with redis.pipeline(transaction=True) as pipe:
            for twin in changed:
                if twin.view is None or twin.version is None:
                    pipe.delete(twin_key(twin.device_id))
                    continue
                pipe.set(twin_key(twin.device_id), msgspec.json.encode(twin.view))
                message = change_message(SNAPSHOT, twin.device_id, twin.version, twin.view)
                pipe.publish(home_channel(twin.home_id), message)
            await pipe.execute()
    finally:
        await redis.aclose()
    return len(changed)
