"""The order the local stack's parts stop in, from what each one depends on.

A part stops only once every part that depends on it has stopped, so each one's clean stop still finds
what it talks to: a device gateway leaving its MQTT sessions while the broker is up takes a moment; with
the broker stopping beside it, it waited 10 s for the unsubscribe answers. Parts with nothing between
them stop together (a wave), so a stack takes as long to stop as its longest chain of dependencies,
not as the sum of every part's stop: the services all at once, then what they use. A Kafka cluster's
nodes, which every service depends on alike, fall in one wave, as they must (one by one, the last node
has no controller quorum and its controlled shutdown waits until it is killed).

Used by the supervisor's ``stop_all`` (``hearth down``, Ctrl-C, the chaos tests' stacks) and by
``stale.stop_orphans`` (the parts a killed ``hearth up`` left, read from the status file, which records
each part's ``depends_on``). Pure: names in, waves out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def stop_waves(names: Sequence[str], depends_on: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """``names`` (in start order) as the waves they stop in: each wave once every part depending on one
    of its parts is in an earlier wave; within a wave in reverse start order (as reports list them).
    Dependencies on names not given are ignored; parts caught in a cycle (none are made) stop together
    last, rather than never."""
    dependants: dict[str, set[str]] = {name: set() for name in names}
    for name in names:
        for dependency in depends_on.get(name, ()):
            if dependency in dependants and dependency != name:
                dependants[dependency].add(name)
    waves: list[list[str]] = []
    stopped: set[str] = set()
    remaining = list(names)
    while remaining:
        wave = [name for name in reversed(remaining) if dependants[name] <= stopped] or remaining[::-1]
        waves.append(wave)
        stopped.update(wave)
        remaining = [name for name in remaining if name not in stopped]
    return waves


__all__ = ["stop_waves"]
