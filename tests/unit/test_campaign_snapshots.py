"""Snapshots of the campaign folds, without a broker: the driver's fleet view, the campaign book (the driver's
and the APIs' ``CampaignFeed``'s) and the driver's snapshot of both. For each, a state restored from a
snapshot and then given the rest of the facts equals the state that folded them all; a snapshot this
release cannot read raises and leaves the state as it was. Also what keeps the fleet view bounded: admin
commands no campaign awaits and home commands whose end never came are forgotten."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from hearth_campaigns.entrypoints.driver import CampaignDriver
from hearth_campaigns.service.fleet_view import HOME_COMMAND_WINDOW, FleetView, FleetViewSnapshot
from hearth_campaigns.settings import CampaignSettings
from hearth_shared.adapters.campaign_feed import CampaignFeed
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.snapshots import MemorySnapshotStore
from hearth_shared.domain.campaign import Campaign
from hearth_shared.domain.campaign_book import CampaignBook, CampaignBookSnapshot
from hearth_shared.domain.campaign_decide import (
    abort,
    advance,
    awaited_commands,
    job_command_id,
    stamp_campaign,
    start_campaign,
)
from hearth_shared.domain.campaign_gates import CommandSight, DeviceSight, FleetSight
from hearth_shared.domain.storable import decode_fact
from hearth_shared.schema.campaign_events import (
    AbortThresholds,
    CampaignFact,
    Firmware,
    FirmwareRegistered,
    StartCampaign,
    decode_campaign_fact,
    encode_campaign_record,
)
from hearth_shared.schema.events import Event, encode, fact_type
from tests.support.device_journal import DeviceJournal
from tests.support.inbox_requests import ack_request, command_request, register_request, report_request

pytestmark = pytest.mark.unit

T0 = datetime(2026, 4, 1, 8, tzinfo=UTC)
NEW = Firmware(device_type="lock", version="2.0.0", url="https://fw.example/2.0.0.bin", sha256="a" * 64)
OLD = Firmware(device_type="lock", version="1.0.0", url="https://fw.example/1.0.0.bin", sha256="b" * 64)
LIMITS = AbortThresholds(max_failed_pct=50, max_offline_pct=50, max_anomaly_ratio=100)


# ------------------------------------------------------------------------------------ device facts


def a_fleets_story() -> list[Event]:
    """Three locks: registered, reporting firmware, online, commanded by their home (converged, failed and
    one still under way), an update_firmware command that failed, and anomalies."""
    journal = DeviceJournal(start=T0)
    ids = ["lock-a", "lock-b", "lock-c"]
    for i, device_id in enumerate(ids):
        journal.send(device_id, register_request(device_id, home_id="h1", device_type="lock"))
        journal.send(
            device_id,
            report_request(device_id, 1, at=journal.now, lock_state="locked", firmware_version=f"1.{i}.0"),
        )
    for seq, device_id in enumerate(ids, start=2):
        unlock = command_request(device_id, "unlock", {}, home_id="h1", at=journal.now)
        journal.send(device_id, unlock)
        journal.send(device_id, ack_request(device_id, unlock.command_id, ok=device_id != "lock-b"))
        journal.send(device_id, report_request(device_id, seq, at=journal.now, lock_state="unlocked"))
    journal.send("lock-c", command_request("lock-c", "lock", {}, home_id="h1", at=journal.now))  # under way
    update = command_request(
        "lock-a",
        "update_firmware",
        {"version": "2.0.0", "url": "https://fw.example/2.bin", "sha256": "c" * 64},
        home_id="h1",
        at=journal.now,
    )
    journal.send("lock-a", update)
    journal.send("lock-a", ack_request("lock-a", update.command_id, ok=False, reason="checksum_mismatch"))
    for _ in range(3):
        journal.anomaly("lock-b")
    journal.send("lock-a", report_request("lock-a", 9, at=journal.now, firmware_version="1.0.1"))
    return journal.facts


def fold_into(view: FleetView, facts: list[Event]) -> FleetView:
    """As the driver does: only the facts the view wants are decoded (from their wire form)."""
    for fact in facts:
        wire = encode(fact)
        if view.wants(fact_type(wire), wire):
            view.apply(decode_fact(wire))
    return view


def fleet_state(view: FleetView) -> FleetViewSnapshot:
    return msgspec.msgpack.decode(view.snapshot(), type=FleetViewSnapshot)


def test_a_fleet_view_restored_and_given_the_tail_equals_the_full_fold() -> None:
    facts = a_fleets_story()
    whole = fold_into(FleetView(), facts)
    assert whole.sight().devices["lock-a"].firmware_version == "1.0.1"
    assert len(whole.sight().devices["lock-b"].anomalies) == 3
    assert [o.converged for o in whole.sight().devices["lock-b"].outcomes] == [False]
    for cut in (0, 7, len(facts) // 2, len(facts) - 3, len(facts)):
        before = fold_into(FleetView(), facts[:cut])
        restored = FleetView()
        restored.restore(before.snapshot())
        fold_into(restored, facts[cut:])
        assert fleet_state(restored) == fleet_state(whole), f"cut at {cut}"
        assert restored.sight() == whole.sight(), f"cut at {cut}"


def test_a_fleet_snapshot_keeps_the_home_commands_under_way() -> None:
    """A home command requested before the snapshot and ended after it is still an outcome, not an admin
    command: the commands under way are part of the snapshot."""
    journal = DeviceJournal(start=T0)
    journal.send("lock-a", register_request("lock-a", home_id="h1", device_type="lock"))
    journal.send("lock-a", report_request("lock-a", 1, at=journal.now, lock_state="locked"))
    unlock = command_request("lock-a", "unlock", {}, home_id="h1", at=journal.now)
    journal.send("lock-a", unlock)
    before = len(journal.facts)
    journal.send("lock-a", ack_request("lock-a", unlock.command_id))
    journal.send("lock-a", report_request("lock-a", 2, at=journal.now, lock_state="unlocked"))
    restored = FleetView()
    restored.restore(fold_into(FleetView(), journal.facts[:before]).snapshot())
    fold_into(restored, journal.facts[before:])
    assert [o.converged for o in restored.sight().devices["lock-a"].outcomes] == [True]
    assert unlock.command_id not in restored.admin_commands


def test_an_unreadable_fleet_snapshot_raises_and_leaves_the_view_as_it_was() -> None:
    view = fold_into(FleetView(), a_fleets_story())
    kept = fleet_state(view)
    newer = msgspec.msgpack.encode(msgspec.structs.replace(kept, format=2))
    with pytest.raises(ValueError, match="format 2"):
        view.restore(newer)
    with pytest.raises(msgspec.DecodeError):
        view.restore(b"\x93not a snapshot")
    assert fleet_state(view) == kept


def test_admin_commands_no_campaign_awaits_are_forgotten() -> None:
    view = fold_into(FleetView(), a_fleets_story())
    (failed,) = view.admin_commands
    assert view.admin_commands[failed].status == "failed"
    view.keep_commands({failed, uuid.uuid4()})
    assert set(view.admin_commands) == {failed}
    view.keep_commands(set())
    assert view.admin_commands == {}


def test_a_home_command_whose_end_never_came_is_forgotten_after_the_window() -> None:
    journal = DeviceJournal(start=T0)
    journal.send("lock-a", register_request("lock-a", home_id="h1", device_type="lock"))
    journal.send("lock-a", report_request("lock-a", 1, at=journal.now, lock_state="locked"))
    lost = command_request("lock-a", "unlock", {}, home_id="h1", at=journal.now, expires_in_s=3600)
    journal.send("lock-a", lost)
    view = fold_into(FleetView(), journal.facts)
    assert fleet_state(view).home_commands[0].command_id == lost.command_id
    journal.facts.clear()
    journal.now += HOME_COMMAND_WINDOW
    later = command_request("lock-a", "lock", {}, home_id="h1", at=journal.now)
    journal.send("lock-a", later)
    fold_into(view, journal.facts)
    assert [c.command_id for c in fleet_state(view).home_commands] == [later.command_id]


# ------------------------------------------------------------------------------------ campaign facts


def a_campaigns_story() -> list[CampaignFact]:
    """Two firmware registrations and two campaigns over ten locks, as the driver would record them: one
    completed wave by wave, one aborted in its first wave (three locks) with rollbacks sent, one of them
    ended."""
    devices = {
        f"lock-{i}": DeviceSight(
            device_id=f"lock-{i}", home_id="h1", device_type="lock", online=True, firmware_version="1.0.0"
        )
        for i in range(10)
    }
    commands: dict[uuid.UUID, CommandSight] = {}
    book = CampaignBook()
    facts: list[CampaignFact] = []
    now = T0

    def record(made: list[CampaignFact]) -> None:
        wire = [decode_campaign_fact(encode_campaign_record(f)) for f in made]  # as read back
        facts.extend(wire)
        book.fold(wire)

    for firmware in (NEW, OLD):
        registered = FirmwareRegistered(
            event_id=uuid.uuid4(),
            campaign_id=f"firmware:lock:{firmware.version}",
            version=1,
            occurred_at=now,
            recorded_at=now,
            firmware=firmware,
        )
        record([registered])
    ids = []
    for _ in range(2):
        request = StartCampaign(
            request_id=uuid.uuid4(), sent_at=now, campaign_id=uuid.uuid4(), firmware=NEW, home_ids=("h1",),
            waves=(30, 100), soak_s=0, abort=LIMITS, job_timeout_s=600,
        )  # fmt: skip
        ids.append(str(request.campaign_id))
        started = start_campaign(request, FleetSight(devices=devices, commands=commands))
        record(stamp_campaign(None, [started], now=now, campaign_id=ids[-1]))
    completed, aborted = ids

    def step(campaign_id: str) -> None:
        campaign = book.campaigns[campaign_id]
        sight = FleetSight(devices=devices, commands=commands)
        record(stamp_campaign(campaign, advance(campaign, book.catalog, sight, now), now=now))

    for _ in range(4):  # each sent job converges at once: wave 1, then wave 2, then completed
        step(completed)
        for device_id in devices:
            commands[job_command_id(completed, device_id)] = CommandSight(status="converged", at=now)
        now += timedelta(seconds=1)
    step(aborted)  # the first wave sent
    campaign = book.campaigns[aborted]
    record(stamp_campaign(campaign, abort(campaign, book.catalog, "operator", {}, now), now=now))
    first, *_ = [j.device_id for j in book.campaigns[aborted].jobs.values() if j.rollback_command_id]
    commands[job_command_id(aborted, first, "rollback")] = CommandSight(status="converged", at=now)
    step(aborted)  # the rollback ended
    assert book.campaigns[completed].status == "completed"
    assert book.campaigns[aborted].status == "aborted"
    return facts


def book_state(book: CampaignBook) -> CampaignBookSnapshot:
    return msgspec.msgpack.decode(book.snapshot(), type=CampaignBookSnapshot)


def test_a_campaign_book_restored_and_given_the_tail_equals_the_full_fold() -> None:
    facts = a_campaigns_story()
    whole = CampaignBook()
    whole.fold(facts)
    for cut in range(len(facts) + 1):
        before = CampaignBook()
        before.fold(facts[:cut])
        restored = CampaignBook()
        restored.restore(before.snapshot())
        restored.fold(facts[cut:])
        assert restored.campaigns == whole.campaigns, f"cut at {cut}"
        assert restored.catalog == whole.catalog, f"cut at {cut}"


def test_a_book_ahead_of_its_position_reads_the_facts_between_again_harmlessly() -> None:
    """The driver folds its own facts as it records them, so its snapshot may hold facts past the
    campaigns topic's saved position: the tail then starts with facts the state has."""
    facts = a_campaigns_story()
    whole = CampaignBook()
    whole.fold(facts)
    ahead = CampaignBook()
    ahead.fold(facts[: len(facts) // 2 + 5])
    restored = CampaignBook()
    restored.restore(ahead.snapshot())
    restored.fold(facts[len(facts) // 2 :])
    assert restored.campaigns == whole.campaigns and restored.catalog == whole.catalog


def test_an_unreadable_campaign_book_snapshot_raises_and_leaves_the_book_as_it_was() -> None:
    book = CampaignBook()
    book.fold(a_campaigns_story())
    kept = book_state(book)
    with pytest.raises(ValueError, match="format 7"):
        book.restore(msgspec.msgpack.encode(msgspec.structs.replace(kept, format=7)))
    with pytest.raises(msgspec.DecodeError):
        book.restore(msgspec.msgpack.encode({"format": 1, "campaigns": "no"}))
    assert book_state(book) == kept


def test_awaited_commands_are_the_running_jobs_under_way_and_the_rollbacks_not_ended() -> None:
    book = CampaignBook()
    book.fold(a_campaigns_story())
    aborted: Campaign = next(c for c in book.campaigns.values() if c.status == "aborted")
    open_rollbacks = {
        j.rollback_command_id
        for j in aborted.jobs.values()
        if j.rollback_command_id is not None and not j.rollback_ended
    }
    assert open_rollbacks and awaited_commands(book.campaigns.values()) == open_rollbacks
    running = msgspec.structs.replace(aborted, status="running", campaign_id="again")
    sent = {j.command_id for j in running.jobs.values() if j.state in ("sent", "in_progress")}
    assert sent and awaited_commands([running]) == sent | open_rollbacks


# ------------------------------------------------------------------------------------ the driver, the feed


def settings() -> CampaignSettings:
    return CampaignSettings(stack=StackSettings(kafka_bootstrap_servers="127.0.0.1:1", topic_prefix="unit"))


def test_the_driver_snapshot_holds_fleet_and_campaigns_and_restores_both_or_neither() -> None:
    device_facts, campaign_facts = a_fleets_story(), a_campaigns_story()
    driver = CampaignDriver(settings(), snapshot_store=MemorySnapshotStore())
    fold_into(driver.fleet, device_facts[:10])
    driver.book.fold(campaign_facts[:12])
    saved = driver.snapshot()

    restarted = CampaignDriver(settings(), snapshot_store=MemorySnapshotStore())
    restarted.restore(saved)
    fold_into(restarted.fleet, device_facts[10:])
    restarted.book.fold(campaign_facts[12:])
    whole = CampaignDriver(settings(), snapshot_store=MemorySnapshotStore())
    fold_into(whole.fleet, device_facts)
    whole.book.fold(campaign_facts)
    assert restarted.snapshot() == whole.snapshot()
    assert restarted.campaigns == whole.campaigns and restarted.fleet.sight() == whole.fleet.sight()

    empty_fleet = FleetView().snapshot()
    broken = msgspec.msgpack.encode({"format": 1, "fleet": empty_fleet, "campaigns": b"\x01garbage"})
    with pytest.raises(msgspec.DecodeError):
        restarted.restore(broken)  # the fleet part decodes, the campaigns part does not: neither is used
    assert restarted.snapshot() == whole.snapshot()


def test_the_feed_snapshots_its_campaign_book() -> None:
    facts = a_campaigns_story()
    stack = settings().stack
    feed = CampaignFeed(stack, snapshot_store=MemorySnapshotStore())
    feed.book.fold(facts)
    policy = feed.follower.snapshots
    assert policy is not None and policy.name == "campaign-feed" and policy.state is feed.book
    again = CampaignFeed(stack, snapshot_store=MemorySnapshotStore())
    again.book.restore(feed.book.snapshot())
    assert again.campaigns == feed.campaigns and again.catalog == feed.catalog
