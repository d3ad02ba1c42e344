"""``hearth status`` shows what each part's topic followers read at its last start: the reports the
followers write (``hearth_shared.adapters.topic_follower.write_report``, the real writer) into the directory
the local stack gives each part, read back with the snapshot's age as of now."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hearth.cli import app
from hearth_device_actor.adapters.serving import ServingFile, serving_file
from hearth_devstack.launch.service_processes import Services, follower_reports_dir
from hearth_devstack.supervision.status import PartStatus, write_status
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.adapters.topic_follower import REPORTS_ENV, RestartReport, write_report
from hearth_shared.schema.events import utcnow

pytestmark = pytest.mark.unit


def report(
    directory: Path,
    name: str,
    restart: RestartReport,
    *,
    written_s_ago: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``restart`` as the follower ``name`` writes it, into ``directory``, written ``written_s_ago``."""
    monkeypatch.setenv(REPORTS_ENV, str(directory))
    write_report(name, restart)
    then = time.time() - written_s_ago
    os.utime(directory / f"{name}.json", (then, then))


def stack_with_reports(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A running stack (this process as its supervisor) of three parts: the command API with two
    followers (one restored a snapshot 40 s before its report, written 30 s ago; one found none), the
    automations whose one report is unreadable, the device actor with no followers."""
    api, automations = home / "followers" / "command-api", home / "followers" / "automations"
    restored = RestartReport(
        started_from="snapshot", replayed=1234, gap=0, caught_up_s=2.5, snapshots_saved=1,
        last_snapshot_at=utcnow() - timedelta(seconds=40),
    )  # fmt: skip
    report(api, "registry", restored, written_s_ago=30, monkeypatch=monkeypatch)
    fresh = RestartReport(started_from="first offset (no snapshot yet)", replayed=52, gap=7, caught_up_s=0.4)
    report(api, "revocations", fresh, written_s_ago=1, monkeypatch=monkeypatch)
    automations.mkdir(parents=True)
    (automations / "homes.json").write_text("{not json")
    parts = [
        PartStatus("command-api", state="running", health="healthy", pid=os.getpid(), reports=str(api)),
        PartStatus(
            "automations", state="running", health="healthy", pid=os.getpid(), reports=str(automations)
        ),
        PartStatus("device-actor", state="running", health="healthy", pid=os.getpid()),
    ]
    write_status(home, parts, supervisor_pid=os.getpid())


def test_status_json_gives_each_part_its_followers_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack_with_reports(tmp_path, monkeypatch)
    result = CliRunner().invoke(app, ["status", "--stack-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    parts = {p["name"]: p for p in document["parts"]}
    registry, revocations = parts["command-api"]["followers"]
    assert registry["follower"] == "registry" and registry["started_from"] == "snapshot"
    assert (registry["replayed"], registry["gap"], registry["caught_up_s"]) == (1234, 0, 2.5)
    assert 69 <= registry["snapshot_age_s"] <= 75  # 40 s old when written, written 30 s ago
    assert revocations["started_from"] == "first offset (no snapshot yet)"
    assert (revocations["replayed"], revocations["gap"], revocations["snapshot_age_s"]) == (52, 7, None)
    (unreadable,) = parts["automations"]["followers"]
    assert unreadable["follower"] == "homes" and unreadable["started_from"].startswith("(unreadable report")
    assert parts["device-actor"]["followers"] == []


def test_status_table_has_a_row_per_follower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack_with_reports(tmp_path, monkeypatch)
    result = CliRunner().invoke(app, ["status", "--stack-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = [line.split("│") for line in result.stdout.splitlines() if line.count("│") == 8]
    rows = {cells[2].strip(): "│".join(cells) for cells in lines if cells[2].strip()}  # not a folded line
    assert set(rows) == {"registry", "revocations", "homes"}
    assert "snapshot" in rows["registry"] and "1,234" in rows["registry"] and "2.5 s" in rows["registry"]
    assert "min" in rows["registry"] or " s " in rows["registry"]  # the snapshot's age, about 70 s
    assert "none yet" in rows["revocations"] and "first offset" in rows["revocations"]
    assert "unreadable" in rows["homes"]


def test_each_service_run_gets_its_own_empty_reports_directory(tmp_path: Path) -> None:
    services = Services(StackSettings(token_secret="x"), logs=tmp_path / "logs", data=tmp_path / "data")
    left = follower_reports_dir(services.data, "command-api")
    left.mkdir(parents=True)
    (left / "registry.json").write_text("{}")  # a killed run's report
    api, _ = services.part("command-api")
    query, _ = services.part("query-api")
    assert api.env[REPORTS_ENV] == str(left) and not left.exists()
    assert query.env[REPORTS_ENV] == str(follower_reports_dir(services.data, "query-api")) != str(left)
    spec = services.spec("command-api", depends_on=[])
    assert spec.reports == str(left)


def test_status_shows_the_inbox_lanes_lag_and_the_reports_coalesced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack_with_reports(tmp_path, monkeypatch)
    serving = ServingFile(
        serving_file(tmp_path / "data" / "device-actor"), group="g", changelog="c", partitions=12
    )
    serving.lag, serving.coalesced_reports = {"hearth.command-lane": 0, "hearth.inbox": 48_210}, 9_031
    serving.late_reports, serving.unknown_device_requests = 417, 23
    serving.serve({0, 1})
    document = json.loads(CliRunner().invoke(app, ["status", "--stack-dir", str(tmp_path), "--json"]).stdout)
    assert document["inbox"] == {
        "lag": {"hearth.command-lane": 0, "hearth.inbox": 48_210},
        "coalesced_reports": 9_031,
        "late_reports": 417,
        "unknown_device_requests": 23,
    }
    table = CliRunner().invoke(app, ["status", "--stack-dir", str(tmp_path)]).stdout
    assert "48,210" in table and "9,031" in table and "417" in table and "23 requests" in table
