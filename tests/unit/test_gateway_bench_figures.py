"""The pure figures of ``hearth bench gateway`` (hearth_bench.figures.gateway_figures)."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from hearth_bench.figures.gateway_figures import (
    Arrivals,
    per_connection_kib,
    ratio,
    report_payloads,
    top_frames,
)
from hearth_shared.schema.mqtt import decode_state

pytestmark = pytest.mark.unit


def test_arrivals_rate_runs_from_the_first_arrival_to_the_last_without_the_first_batch() -> None:
    a = Arrivals()
    a.add(0, 5.0)  # nothing arrived: not the start
    a.add(100, 10.0)
    a.add(300, 11.0)
    a.add(200, 12.0)
    assert (a.count, a.first, a.last) == (600, 10.0, 12.0)
    assert a.rate == pytest.approx(500 / 2.0)


def test_arrivals_all_at_once_or_none_have_no_rate() -> None:
    assert Arrivals().rate == 0.0
    once = Arrivals()
    once.add(1000, 3.0)
    assert once.rate == 0.0


def test_memory_per_connection_in_kib() -> None:
    assert per_connection_kib(100 * 2**20, 110 * 2**20, 1024) == pytest.approx(10.0)
    assert per_connection_kib(100, 90, 10) < 0  # shrinking is reported as it is
    with pytest.raises(ValueError, match="no connections"):
        per_connection_kib(0, 1, 0)


def test_ratio_to_the_floor() -> None:
    assert ratio(7_000, 14_000) == 0.5
    assert ratio(1.0, 0.0) == 0.0


def test_report_payloads_are_valid_reports_with_increasing_seq_and_a_change_each_time() -> None:
    payloads = list(report_payloads(3, 12, at="2026-11-24T00:00:00+00:00"))
    assert [d for d, _ in payloads] == [0, 1, 2] * 4
    by_device: dict[int, list[tuple[int, float]]] = {}
    for device, payload in payloads:
        report = decode_state(payload)  # the gateway's own edge accepts them
        by_device.setdefault(device, []).append((report.seq, report.state["ambient_c"]))
    for reports in by_device.values():
        assert [seq for seq, _ in reports] == [1, 2, 3, 4]
        readings = [reading for _, reading in reports]
        assert all(a != b for a, b in itertools.pairwise(readings))
    assert msgspec.json.decode(payloads[0][1])["at"] == "2026-11-24T00:00:00+00:00"


def test_top_frames_counts_self_and_total_time_per_function() -> None:
    collapsed = "\n".join(
        [
            "main (app.py:1);handle (uplink.py:50);decode (edge.py:10) 6",
            "main (app.py:1);handle (uplink.py:52);put (writer.py:40) 3",
            "main (app.py:2) 1",
            "not a sample line",
        ]
    )
    top = top_frames(collapsed, n=2)
    assert top["self"] == [("decode (edge.py)", 0.6), ("put (writer.py)", 0.3)]
    assert top["total"] == [("main (app.py)", 1.0), ("handle (uplink.py)", 0.9)]
    assert top_frames("") == {"self": [], "total": []}
