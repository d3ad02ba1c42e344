"""A known journal history for the analytics tests (its daily report's figures are worked out by hand in
tests/integration/test_analytics_batch.py), and producing records to a test topic."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from hearth_shared.schema.events import (
    AnomalyDetected,
    AnomalyDetectedPayload,
    CommandAccepted,
    CommandConverged,
    CommandExpired,
    CommandFailed,
    CommandFailedPayload,
    CommandRef,
    CommandRejected,
    CommandRejectedPayload,
    CommandRequested,
    CommandRequestedPayload,
    CommandSuperseded,
    CommandSupersededPayload,
    DeviceRegistered,
    DeviceRegisteredPayload,
    Event,
    StateReported,
    StateReportedPayload,
)

DAY1, DAY2 = datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21, tzinfo=UTC)


def at(day: datetime, hh: int, mm: int = 0, ss: int = 0) -> datetime:
    return day + timedelta(hours=hh, minutes=mm, seconds=ss)


class Journal:
    def __init__(self) -> None:
        self.versions: dict[str, int] = defaultdict(int)
        self.facts: list[Event] = []

    def add(self, cls: Any, payload: Any, device: str, home: str, t: datetime, cid: Any = None) -> None:
        self.versions[device] += 1
        self.facts.append(
            cls(event_id=uuid.uuid4(), device_id=device, home_id=home, version=self.versions[device],
                occurred_at=t, recorded_at=t, correlation_id=cid, payload=payload)
        )  # fmt: skip

    def register(self, device: str, home: str, device_type: str) -> None:
        payload = DeviceRegisteredPayload(device_type=device_type, name=device)
        self.add(DeviceRegistered, payload, device, home, at(DAY1, 0))

    def report(self, device: str, home: str, t: datetime, **reported: Any) -> None:
        payload = StateReportedPayload(reported=reported, device_seq=self.versions[device] + 1, device_time=t)
        self.add(StateReported, payload, device, home, t)

    def command(self, device: str, home: str, t: datetime, outcome: str | None) -> None:
        cid = uuid.uuid4()
        requested = CommandRequestedPayload(
            command_id=cid, name="lock", params={}, expires_at=t + timedelta(minutes=5)
        )
        self.add(CommandRequested, requested, device, home, t, cid)
        if outcome == "rejected":
            refused = CommandRejectedPayload(command_id=cid, reason="door_open", message="open")
            self.add(CommandRejected, refused, device, home, t, cid)
            return
        self.add(CommandAccepted, CommandRef(command_id=cid), device, home, t, cid)
        later = t + timedelta(seconds=20)
        if outcome == "converged":
            self.add(CommandConverged, CommandRef(command_id=cid), device, home, later, cid)
        elif outcome == "failed":
            failed = CommandFailedPayload(command_id=cid, reason="device_jammed")
            self.add(CommandFailed, failed, device, home, later, cid)
        elif outcome == "expired":
            self.add(CommandExpired, CommandRef(command_id=cid), device, home, later, cid)
        elif outcome == "superseded":
            payload = CommandSupersededPayload(command_id=cid, superseded_by=uuid.uuid4())
            self.add(CommandSuperseded, payload, device, home, later, cid)
            self.add(
                CommandExpired, CommandRef(command_id=cid), device, home, later + timedelta(minutes=5), cid
            )

    def anomaly(self, device: str, home: str, t: datetime) -> None:
        payload = AnomalyDetectedPayload(
            metric="ambient_c", value=35.0, score=6.2, threshold=4.0, model_version=3, device_time=t
        )
        self.add(AnomalyDetected, payload, device, home, t + timedelta(seconds=1))


def known_history() -> Journal:
    j = Journal()
    j.register("t1", "h1", "thermostat")
    j.register("l1", "h1", "lock")
    j.register("t2", "h2", "thermostat")  # x9 (home h2) never registered: device_type "unknown"
    # t1: heats 22:30 -> 00:30 (90 min on day 1, 30 on day 2), cools 12:00 -> its last reading at 12:45.
    j.report("t1", "h1", at(DAY1, 22), ambient_c=20.0, humidity_pct=40.0, hvac_action="idle")
    j.report("t1", "h1", at(DAY1, 22, 30), ambient_c=19.0, hvac_action="heating")
    j.report("t1", "h1", at(DAY1, 23), ambient_c=19.5)
    j.report("t1", "h1", at(DAY2, 0, 30), ambient_c=21.0, hvac_action="idle")
    j.report("t1", "h1", at(DAY2, 12), ambient_c=26.0, hvac_action="cooling")
    j.report("t1", "h1", at(DAY2, 12, 45), ambient_c=24.5)
    # l1 on day 1: 3 locks, 2 unlocks, 1 jam, the door opened once.
    lock_reports: list[tuple[datetime, dict[str, Any]]] = [
        (at(DAY1, 8), {"lock_state": "unlocked", "battery_pct": 90.0}),
        (at(DAY1, 8, 1), {"lock_state": "locked"}),
        (at(DAY1, 18), {"lock_state": "unlocked"}),
        (at(DAY1, 18, 0, 5), {"door": "open"}),
        (at(DAY1, 18, 1), {"door": "closed"}),
        (at(DAY1, 18, 2), {"lock_state": "locked"}),
        (at(DAY1, 21), {"lock_state": "jammed"}),
        (at(DAY1, 21, 5), {"lock_state": "locked", "battery_pct": 89.0}),
    ]
    for t, reported in lock_reports:
        j.report("l1", "h1", t, **reported)
    # Commands: l1 day 1 -> converged, failed, rejected; t1 day 2 -> converged, expired, superseded, open.
    for t, outcome in [
        (at(DAY1, 7, 59), "converged"),
        (at(DAY1, 20, 59), "failed"),
        (at(DAY1, 21, 4), "rejected"),
    ]:
        j.command("l1", "h1", t, outcome)
    day2: list[tuple[datetime, str | None]] = [
        (at(DAY2, 11, 59), "converged"),
        (at(DAY2, 12, 10), "expired"),
        (at(DAY2, 12, 20), "superseded"),
        (at(DAY2, 12, 30), None),
    ]
    for t, maybe_outcome in day2:
        j.command("t1", "h1", t, maybe_outcome)
    j.anomaly("t1", "h1", at(DAY2, 12))
    j.anomaly("t1", "h1", at(DAY2, 12, 45))
    # h2: t2 cools 10:00 -> 10:20 on day 1 (one anomaly); x9 reports once.
    j.report("t2", "h2", at(DAY1, 10), ambient_c=30.0, hvac_action="cooling")
    j.anomaly("t2", "h2", at(DAY1, 10))
    j.report("t2", "h2", at(DAY1, 10, 20), ambient_c=28.0, hvac_action="idle")
    j.report("x9", "h2", at(DAY1, 10), ambient_c=21.0)
    return j
