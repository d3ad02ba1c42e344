"""A twin as the public contract shows it: its fields, and its ``delta`` (the desired keys the device has
not reported yet, within its type's tolerances: the same rule that converges a command).

Above the registry, since the delta needs the device's type; the twin itself (twin.py) stays data that
every type's module can take.
"""

from __future__ import annotations

from hearth_shared.domain.registry import reported_matches
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import JSON


def twin_delta(twin: Twin) -> JSON:
    """The desired keys the device has not reported (yet), within its type's tolerances."""
    return {
        key: value
        for key, value in twin.desired.items()
        if not reported_matches(twin.device_type, key, value, twin.reported)
    }


def twin_view(twin: Twin) -> JSON:
    """The twin as the public contract shows it (JSON-ready)."""
    return {
        "device_id": twin.device_id,
        "home_id": twin.home_id,
        "type": twin.device_type,
        "name": twin.name,
        "desired": dict(twin.desired),
        "reported": dict(twin.reported),
        "delta": twin_delta(twin),
        "version": twin.version,
        "connectivity": {
            "online": twin.online,
            "last_seen": twin.last_seen.isoformat() if twin.last_seen else None,
        },
        "firmware_version": twin.reported.get("firmware_version"),
        "updated_at": twin.updated_at.isoformat(),
        "quarantine": (
            {"reason": twin.quarantine.reason, "since": twin.quarantine.since.isoformat()}
            if twin.quarantine
            else None
        ),
    }
