"""Firmware campaign decisions as pure functions, with a fake clock: wave sizes, job states, timeouts,
gates, abort and rollback, and the replay of a campaign's facts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from functools import reduce

import msgspec
import pytest

from hearth_shared.domain.campaign import (
    Campaign,
    FirmwareCatalog,
    evolve_campaign,
    fold_campaign,
    register_firmware,
)
from hearth_shared.domain.campaign_decide import (
    EVIDENCE_MARGIN,
    CampaignRefused,
    abort,
    advance,
    evidence_since,
    job_command_id,
    stamp_campaign,
    start_campaign,
)
from hearth_shared.domain.campaign_gates import (
    CommandSight,
    DeviceSight,
    FleetSight,
    wave_devices,
    wave_sizes,
)
from hearth_shared.schema.campaign_events import (
    AbortThresholds,
    CampaignFact,
    Firmware,
    FirmwareRegistered,
    StartCampaign,
    decode_campaign_fact,
    encode_campaign_record,
)
from tests.support.fakes import FakeClock

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
NEW = Firmware(device_type="lock", version="2.0.0", url="https://fw.example/2.0.0.bin", sha256="a" * 64)
OLD = Firmware(device_type="lock", version="1.0.0", url="https://fw.example/1.0.0.bin", sha256="b" * 64)
LIMITS = AbortThresholds(max_failed_pct=10, max_offline_pct=10, max_anomaly_ratio=3)


@pytest.mark.parametrize(
    ("n", "waves", "sizes"),
    [
        (100, (1, 10, 100), [1, 9, 90]),
        (10_000, (1, 10, 100), [100, 900, 9000]),
        (5, (1, 10, 100), [1, 1, 3]),
        (1, (1, 10, 100), [1, 0, 0]),
        (7, (50, 100), [4, 3]),
        (3, (100,), [3]),
    ],
)
def test_wave_sizes_follow_cumulative_percents(n: int, waves: tuple[float, ...], sizes: list[int]) -> None:
    assert wave_sizes(n, waves) == sizes
    assert sum(sizes) == n


@pytest.mark.parametrize("waves", [(), (10, 5, 100), (1, 10)])
def test_waves_must_increase_to_100(waves: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="cumulative"):
        wave_sizes(10, waves)


class Run:
    """A campaign driven by ``advance`` against a fleet the test plays, through the wire like a replay."""

    def __init__(self, n: int = 100, *, register_old: bool = True, soak_s: float = 60) -> None:
        self.clock = FakeClock(T0)
        self.devices = {
            f"lock-{i:03}": DeviceSight(
                device_id=f"lock-{i:03}",
                home_id="h1",
                device_type="lock",
                online=True,
                firmware_version="1.0.0",
            )
            for i in range(n)
        }
        self.commands: dict[uuid.UUID, CommandSight] = {}
        self.catalog: FirmwareCatalog = {}
        self.facts: list[CampaignFact] = []
        for firmware in (NEW, OLD) if register_old else (NEW,):
            register_firmware(
                self.catalog,
                FirmwareRegistered(
                    event_id=uuid.uuid4(),
                    campaign_id="fw",
                    version=1,
                    occurred_at=T0,
                    recorded_at=T0,
                    firmware=firmware,
                ),
            )
        request = StartCampaign(
            request_id=uuid.uuid4(),
            sent_at=T0,
            campaign_id=uuid.uuid4(),
            firmware=NEW,
            home_ids=("h1",),
            waves=(1, 10, 100),
            soak_s=soak_s,
            abort=LIMITS,
            job_timeout_s=120,
        )
        started = start_campaign(request, self.fleet)
        self.campaign: Campaign | None = None
        self._record(stamp_campaign(None, [started], now=T0, campaign_id=str(request.campaign_id)))

    @property
    def fleet(self) -> FleetSight:
        return FleetSight(devices=self.devices, commands=self.commands)

    @property
    def state(self) -> Campaign:
        assert self.campaign is not None
        return self.campaign

    def _record(self, facts: list[CampaignFact]) -> None:
        wire = [decode_campaign_fact(encode_campaign_record(fact)) for fact in facts]  # as read back
        self.facts += wire
        self.campaign = fold_campaign(self.campaign, wire)

    def step(self, after_s: float = 0.0) -> list[str]:
        self.clock.now += timedelta(seconds=after_s)
        facts = stamp_campaign(
            self.state, advance(self.state, self.catalog, self.fleet, self.clock()), now=self.clock()
        )
        self._record(facts)
        return [fact.__struct_config__.tag for fact in facts]  # type: ignore[misc]

    def command(self, device_id: str, status: str, reason: str = "", purpose: str = "update") -> None:
        command_id = job_command_id(self.state.campaign_id, device_id, purpose)
        self.commands[command_id] = CommandSight(status=status, reason=reason, at=self.clock())

    def wave(self, wave: int) -> tuple[str, ...]:
        return wave_devices(self.state, wave)


def test_a_campaign_goes_wave_by_wave_after_soaking_and_completes() -> None:
    run = Run()
    assert run.step() == ["campaign.wave_started", "campaign.job_moved"]  # one device: 1 %
    (first,) = run.wave(0)
    assert run.state.jobs[first].state == "sent"
    run.command(first, "acknowledged")
    assert run.step(1) == ["campaign.job_moved"] and run.state.jobs[first].state == "in_progress"
    run.command(first, "converged")
    assert run.step(1) == ["campaign.job_moved"] and run.state.jobs[first].state == "succeeded"
    assert run.step(59) == []  # soaking
    assert run.step(1)[:2] == ["campaign.wave_passed", "campaign.wave_started"]
    assert len(run.wave(1)) == 9 and all(run.state.jobs[d].state == "sent" for d in run.wave(1))
    assert all(run.state.jobs[d].state == "queued" for d in run.wave(2))
    for wave in (1, 2):
        for device_id in run.wave(wave):
            run.command(device_id, "converged")
        run.step(1)
        run.step(60)
    assert run.state.status == "completed"
    assert {job.state for job in run.state.jobs.values()} == {"succeeded"}
    assert len(run.state.waves_passed) == 3


def test_a_failed_install_in_the_first_wave_aborts_before_the_second() -> None:
    run = Run()
    run.step()
    (first,) = run.wave(0)
    run.command(first, "failed", "bad_checksum")
    facts = run.step(1)
    assert facts == ["campaign.job_moved", "campaign.aborted"]  # failed: its firmware never changed
    assert run.state.status == "aborted" and run.state.abort_reason == "failed_pct"
    assert run.state.jobs[first].state == "failed" and run.state.jobs[first].reason == "bad_checksum"
    assert all(run.state.jobs[d].state == "queued" for d in run.wave(1))
    assert run.step(600) == []  # nothing more: no second wave


def test_a_drifting_wave_aborts_on_the_anomaly_ratio_and_rolls_back() -> None:
    run = Run(n=20)
    run.step()
    (first,) = run.wave(0)
    run.command(first, "converged")
    run.step(1)
    drifting = run.devices[first]
    run.devices[first] = DeviceSight(
        device_id=first,
        home_id="h1",
        device_type="lock",
        online=True,
        firmware_version="2.0.0",
        anomalies=tuple(run.clock() + timedelta(seconds=s) for s in (5, 10, 15)),
    )
    assert drifting.firmware_version == "1.0.0"
    facts = run.step(20)  # during the soak: a crossed gate does not wait for its end
    assert facts == ["campaign.aborted", "campaign.rollback_sent"]
    assert run.state.abort_reason == "anomaly_ratio"
    assert run.state.jobs[first].rollback_to == "1.0.0"
    run.command(first, "converged", purpose="rollback")
    assert run.step(5) == ["campaign.job_moved"]
    assert run.state.jobs[first].state == "rolled_back"
    assert run.step(5) == []


def test_a_device_that_never_comes_back_times_out_and_aborts() -> None:
    run = Run()
    run.step()
    (first,) = run.wave(0)
    run.command(first, "acknowledged")
    run.step(1)
    assert run.step(100) == []
    facts = run.step(20)  # 121 s after it was sent: the job timeout (120 s) passed
    assert facts[:2] == ["campaign.job_moved", "campaign.aborted"]
    assert run.state.jobs[first].state == "timed_out"
    assert "rollback_sent" in facts[-1]  # it may come back on the new firmware: roll it back then


def test_an_unregistered_previous_firmware_cannot_be_rolled_back_and_says_so() -> None:
    run = Run(register_old=False)
    run.step()
    (first,) = run.wave(0)
    run.command(first, "converged")
    run.step(1)
    facts = stamp_campaign(
        run.state, abort(run.state, run.catalog, "requested", {}, run.clock()), now=run.clock()
    )
    run._record(facts)
    assert run.state.status == "aborted"
    assert run.state.jobs[first].reason.startswith("no_rollback_firmware")
    assert abort(run.state, run.catalog, "requested", {}, run.clock()) == []  # aborting twice: nothing


def test_a_campaign_replays_from_its_facts_to_the_same_state() -> None:
    run = Run(n=30)
    run.step()
    run.command(run.wave(0)[0], "converged")
    run.step(1)
    run.step(60)
    run.command(run.wave(1)[0], "failed", "bad_checksum")
    run.step(1)
    replayed = reduce(evolve_campaign, run.facts, None)
    assert replayed == run.state
    assert [f.version for f in run.facts] == list(range(1, len(run.facts) + 1))
    assert evolve_campaign(replayed, run.facts[3]) == replayed  # an old fact again changes nothing


def test_a_target_must_name_devices_of_the_firmwares_type() -> None:
    run = Run(n=3)
    fleet = run.fleet
    request = StartCampaign(
        request_id=uuid.uuid4(),
        sent_at=T0,
        campaign_id=uuid.uuid4(),
        firmware=NEW,
        device_ids=("lock-000", "nope"),
        waves=(100,),
        soak_s=0,
        abort=LIMITS,
    )
    with pytest.raises(CampaignRefused, match="bad_target"):
        start_campaign(request, fleet)
    with pytest.raises(CampaignRefused, match="empty_target"):
        start_campaign(msgspec.structs.replace(request, device_ids=(), home_ids=("other",)), fleet)


def test_the_evidence_a_gate_may_read_starts_at_the_oldest_campaign_under_way() -> None:
    run = Run()
    later = T0 + timedelta(days=3)
    assert evidence_since([run.state], later) == T0 - EVIDENCE_MARGIN  # a campaign running since T0
    done = msgspec.structs.replace(run.state, status="completed")
    assert evidence_since([done], later) == later - EVIDENCE_MARGIN  # nothing under way: only the latest
    assert evidence_since([], later) == later - EVIDENCE_MARGIN
