"""The runtime report end to end on a real broker, PostgreSQL, Redis and the session's Spark: two days of
thermostat facts and a schedule hold -> ``hearth analytics runtime`` (the Spark batch over the journal and
the home journal) -> records on the rollups topic -> the projector -> the query API's
``GET /v1/devices/{id}/runtime`` and ``GET /v1/homes/{id}/runtime`` answer the figures worked out by hand
below, per thermostat and per home, on the home's own days."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from hearth_analytics.jobs.runtime_report import build_runtime_report
from hearth_analytics.settings import AnalyticsSettings
from hearth_read_models.settings import ReadModelSettings
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.home_facts import (
    HoldPayload,
    HomeTimezoneSet,
    ScheduleHoldStarted,
    ScheduleResumed,
    TimezonePayload,
)
from hearth_shared.schema.auth import create_token
from tests.integration.test_home_history_views import query_api
from tests.integration.test_projector import caught_up, running_projector
from tests.support.home_history import write_home_facts
from tests.support.known_history import Journal
from tests.support.platform import SECRET
from tests.support.topics import produce_facts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class Homes:
    """Home ``h`` (Europe/Berlin, reported by its thermostats) with thermostats ``t1`` and ``t2`` and a lock;
    home ``n`` (America/New_York set on the home journal, though its thermostat reports Europe/Berlin)
    with ``t3``. Ids carry the test's prefix: the session's Redis twin cache is shared."""

    def __init__(self, prefix: str) -> None:
        self.h, self.n = f"h-{prefix}", f"n-{prefix}"
        self.t1, self.t2, self.t3, self.lock = (f"{name}-{prefix}" for name in ("t1", "t2", "t3", "l1"))

    def journal(self) -> Journal:
        j = Journal()
        for device, home, kind in [(self.t1, self.h, "thermostat"), (self.t2, self.h, "thermostat"),
                                   (self.lock, self.h, "lock"), (self.t3, self.n, "thermostat")]:  # fmt: skip
            j.register(device, home, kind)
        # t1 (Berlin is UTC+1): heats 06:30-07:30 UTC after a manual change, and 22:30-23:30 UTC across the
        # home's midnight (23:00 UTC); outdoor 8 degC until 07:30, then 10; reports every 30 minutes.
        j.report(self.t1, self.h, utc("2026-11-20T06:00"), time_zone="Europe/Berlin", hvac_action="idle",
                 outdoor_c=8.0, target_c=17.0, panel_changes=2)  # fmt: skip
        j.report(
            self.t1, self.h, utc("2026-11-20T06:30"), hvac_action="heating", target_c=21.0, panel_changes=3
        )
        j.report(self.t1, self.h, utc("2026-11-20T07:00"), ambient_c=19.0)
        j.report(self.t1, self.h, utc("2026-11-20T07:30"), hvac_action="idle", outdoor_c=10.0)
        for hour in range(8, 24):
            for minute in (0, 30):
                action = {"22:30": "heating", "23:30": "idle"}.get(f"{hour}:{minute:02}")
                keys: dict[str, Any] = {"ambient_c": 20.0} | ({"hvac_action": action} if action else {})
                j.report(self.t1, self.h, utc(f"2026-11-20T{hour:02}:{minute:02}"), **keys)
        # t2: heats 10:00-10:45 UTC, its last report at 11:00 holds until 12:00 (an hour at most)
        j.report(self.t2, self.h, utc("2026-11-20T10:00"), hvac_action="heating", outdoor_c=10.0)
        j.report(self.t2, self.h, utc("2026-11-20T10:45"), hvac_action="idle")
        j.report(self.t2, self.h, utc("2026-11-20T11:00"), ambient_c=20.5)
        j.report(self.lock, self.h, utc("2026-11-20T08:00"), lock_state="locked")  # not a thermostat
        # t3 in New York (UTC-5): heats 04:30-05:30 UTC, which is 23:30-00:30 local
        j.report(self.t3, self.n, utc("2026-11-20T04:30"), time_zone="Europe/Berlin", hvac_action="heating")
        j.report(self.t3, self.n, utc("2026-11-20T05:00"), ambient_c=19.0)
        j.report(self.t3, self.n, utc("2026-11-20T05:30"), hvac_action="idle")
        j.report(self.t3, self.n, utc("2026-11-20T06:00"), ambient_c=19.5)
        return j

    def home_facts(self) -> list[Any]:
        at = utc("2026-11-19T12:00")
        zone = HomeTimezoneSet(fact_id=uuid.uuid4(), home_id=self.n, occurred_at=at, recorded_at=at,
                               payload=TimezonePayload(timezone="America/New_York"))  # fmt: skip
        # t1 held from 21:00 UTC (22:00 local) until resumed at 23:30 UTC (00:30 local)
        held, resumed = utc("2026-11-20T21:00"), utc("2026-11-20T23:30")
        hold = HoldPayload(command_id=uuid.uuid4(), hold_until=utc("2026-11-21T05:00"))
        return [
            zone,
            ScheduleHoldStarted(
                fact_id=uuid.uuid4(),
                home_id=self.h,
                device_id=self.t1,
                occurred_at=held,
                recorded_at=held,
                payload=hold,
            ),
            ScheduleResumed(
                fact_id=uuid.uuid4(),
                home_id=self.h,
                device_id=self.t1,
                occurred_at=resumed,
                recorded_at=resumed,
            ),
        ]


UNTIL = utc("2026-11-21T00:00")  # the batch's time: t1's last report (23:30) holds until it
# t1's local 2026-11-20 (23:00 UTC on the 19th to 23:00 UTC): reports 06:00-23:00 UTC, outdoor 8 degC for
# 90 minutes then 10 degC for 930: 10 x 90 + 8 x 930 degree-minutes.
T1_DAY1_HDD = (10 * 90 + 8 * 930) / 1440
T2_DAY1_HDD = 8 * 120 / 1440  # 10:00-12:00 UTC at 10 degC


async def answer(query: httpx.AsyncClient, path: str, start: str, end: str) -> dict[str, Any]:
    response = await query.get(path, params={"from": start, "to": end})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def figures(answer: dict[str, Any], **keys: Any) -> dict[str, Any]:
    found: list[dict[str, Any]] = [i for i in answer["items"] if all(i.get(k) == v for k, v in keys.items())]
    assert len(found) == 1, (keys, answer)
    return found[0]


async def test_the_runtime_batch_reaches_the_query_api_per_thermostat_and_home_on_the_homes_days(
    spark: Any, stack: StackSettings, tmp_path: Path
) -> None:
    homes = Homes(stack.topic_prefix)
    await produce_facts(stack, homes.journal().facts)
    await write_home_facts(stack, homes.home_facts())
    settings = AnalyticsSettings(stack=stack, checkpoint_dir=tmp_path / "ckpt", output_dir=tmp_path / "out",
                                 archive_url=str(tmp_path / "archive"))  # fmt: skip

    report = build_runtime_report(spark, settings, until=UNTIL)

    # t1: the 20th and 21st (Berlin); t2: the 20th; t3: the 19th and 20th (New York); homes h and n: 2 each
    assert (report.device_days, report.home_days) == (5, 4)
    assert (report.first_day, report.last_day) == ("2026-11-19", "2026-11-21")
    read_models = ReadModelSettings(stack=stack, schema_name=f"rm_{stack.topic_prefix}")
    async with running_projector(stack, read_models.schema_name) as projector:
        await caught_up(projector)
        async with query_api(read_models) as (_, query):
            t1 = await answer(query, f"/v1/devices/{homes.t1}/runtime", "2026-11-20", "2026-11-21")
            home = await answer(query, f"/v1/homes/{homes.h}/runtime", "2026-11-20", "2026-11-20")
            t3 = await answer(query, f"/v1/devices/{homes.t3}/runtime", "2026-11-01", "2026-11-30")
            bad = await query.get(
                f"/v1/homes/{homes.h}/runtime", params={"from": "2026-11-21", "to": "2026-11-20"}
            )
            stranger = {"Authorization": f"Bearer {create_token(SECRET, home_id=homes.n)}"}
            other = await query.get(f"/v1/homes/{homes.h}/runtime", headers=stranger)
            other_device = await query.get(f"/v1/devices/{homes.t1}/runtime", headers=stranger)

    assert (t1["device_id"], t1["home_id"], t1["from"], t1["to"]) == (
        homes.t1,
        homes.h,
        "2026-11-20",
        "2026-11-21",
    )
    assert [d["day"] for d in t1["items"]] == ["2026-11-20", "2026-11-21"]
    day1, day2 = t1["items"]
    assert day1 == {
        "day": "2026-11-20", "time_zone": "Europe/Berlin", "day_start": "2026-11-20T00:00:00+01:00",
        "day_end": "2026-11-21T00:00:00+01:00", "covered_min": 1020.0, "heating_min": 90.0,
        "cooling_min": 0.0,
        "hdd": round(T1_DAY1_HDD, 4), "heating_min_per_hdd": round(90.0 / T1_DAY1_HDD, 3),
        "outdoor_mean_c": round((8 * 90 + 10 * 930) / 1020, 3), "manual_changes": 1, "holds": 1,
        "hold_min": 120.0, "away_min": 0.0,
    }  # fmt: skip
    assert day2 == {
        "day": "2026-11-21", "time_zone": "Europe/Berlin", "day_start": "2026-11-21T00:00:00+01:00",
        "day_end": "2026-11-22T00:00:00+01:00", "covered_min": 60.0, "heating_min": 30.0, "cooling_min": 0.0,
        "hdd": round(8 * 60 / 1440, 4), "heating_min_per_hdd": None, "outdoor_mean_c": 10.0,
        "manual_changes": 0, "holds": 0, "hold_min": 30.0, "away_min": 0.0,
    }  # fmt: skip

    assert sorted(item["device_id"] for item in home["items"]) == sorted([homes.t1, homes.t2])  # no lock
    t2 = figures(home, device_id=homes.t2)
    assert (t2["covered_min"], t2["heating_min"], t2["hdd"]) == (120.0, 45.0, round(T2_DAY1_HDD, 4))
    assert figures(home, device_id=homes.t1)["heating_min"] == 90.0
    (home_day,) = home["days"]
    mean_hdd = (T1_DAY1_HDD + T2_DAY1_HDD) / 2
    assert home_day["devices"] == 2 and home_day["day"] == "2026-11-20"
    assert (home_day["heating_min"], home_day["covered_min"], home_day["manual_changes"]) == (
        135.0,
        1140.0,
        1,
    )
    assert (home_day["holds"], home_day["hold_min"]) == (1, 120.0)
    assert home_day["hdd"] == pytest.approx(mean_hdd, abs=1e-4)
    assert home_day["heating_min_per_hdd"] == pytest.approx(135.0 / mean_hdd, abs=1e-2)

    # t3 counts New York's days (the zone set on the home journal wins over the one its thermostat reports)
    assert [(d["day"], d["heating_min"], d["time_zone"]) for d in t3["items"]] == [
        ("2026-11-19", 30.0, "America/New_York"), ("2026-11-20", 30.0, "America/New_York"),
    ]  # fmt: skip
    assert bad.status_code == 422
    assert other.status_code == 404 and other_device.status_code == 404
