"""The mixed bench's rules and figures, pure: when a telemetry rate counts as sustained, the rates the
search offers, the highest one sustained, a group of commands' figures and the readings' account.

Sustained: during the second half of a step (the first half lets the lag settle from the step before),
the telemetry lane is never more than ``LAG_BOUND_S`` seconds of readings behind its end, as the device
actor's serving file says once a second. A worker that falls behind by a fraction ``x`` of the offered
rate is ``x * rate * t`` records behind after ``t`` seconds: over a 30 s step, 4 % behind already fails.
Why a bound and not "the lag never grew": the lag of a worker that keeps up jitters by a batch or two
(5,000 records) at any rate, which a strict "never grew" would read as falling behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hearth_bench.harness.load_client import latency_ms
from hearth_shared.schema.events import TERMINAL_STATUSES

LAG_BOUND_S = 1.0
WINDOW_S = 10.0  # the stretch of a phase each p99 of ``p99_by_window`` covers
SENDER_SHORT = 0.05


def sustained(lags: Sequence[int], rate: float, bound_s: float = LAG_BOUND_S) -> bool:
    """Did the step keep up: in its second half, the lane never more than ``bound_s`` of readings behind?
    ``lags``: the telemetry lane's lag (records), sampled once a second during the step."""
    second_half = lags[len(lags) // 2 :]
    return bool(second_half) and max(second_half) <= rate * bound_s


def search_rates(start: float, factor: float, top: float) -> list[float]:
    """The rates the search offers, in order: ``start``, then each ``factor`` times the one before, up
    to ``top``."""
    if start <= 0 or factor <= 1 or top < start:
        raise ValueError(f"a search needs 0 < start <= top and factor > 1, not {start}, {factor}, {top}")
    rates = [start]
    while rates[-1] * factor <= top:
        rates.append(round(rates[-1] * factor))
    return rates


def sender_short(offered: float, achieved: float) -> bool:
    """Did the bench's sender fall short of the rate it offered (by more than ``SENDER_SHORT``)? Then a
    higher rate would not be offered either: the search ends there, and the ceiling is the client's."""
    return achieved < (1 - SENDER_SHORT) * offered


def highest_sustained(steps: Sequence[tuple[float, bool]]) -> float | None:
    """The highest achieved rate of the steps sustained before the first one that was not (``steps``:
    each step's achieved rate and whether it was sustained, in the order offered; a sender that fell
    short may have achieved less in a later step than in an earlier one); None if the first failed."""
    best = None
    for rate, kept_up in steps:
        if not kept_up:
            break
        best = rate if best is None else max(best, rate)
    return best


def command_figures(times: Iterable[Mapping[str, float]]) -> dict[str, Any]:
    """A group of commands' figures from their times (``mark_commands``: ``submitted``, the request's
    ``sent_at``; each status's fact's ``recorded_at``): requested -> dispatched and -> converged, the
    statuses they ended in, and how many reached none."""
    times = list(times)
    dispatched: list[float] = []
    converged: list[float] = []
    ended: dict[str, int] = {}
    count = unfinished = 0
    for t in times:
        count += 1
        if "submitted" in t and "dispatched" in t:
            dispatched.append(t["dispatched"] - t["submitted"])
        if "submitted" in t and "converged" in t:
            converged.append(t["converged"] - t["submitted"])
        terminal = [status for status in t if status in TERMINAL_STATUSES]
        if not terminal:
            unfinished += 1
        for status in terminal:
            ended[status] = ended.get(status, 0) + 1
    return {
        "commands": count,
        "to_dispatched_ms": latency_ms(dispatched),
        "dispatched_p99_ms_by_window": p99_by_window(times),
        "to_converged_ms": latency_ms(converged),
        "ended": dict(sorted(ended.items())),
        "unfinished": unfinished,
    }


def p99_by_window(times: Sequence[Mapping[str, float]], window_s: float = WINDOW_S) -> list[float | None]:
    """requested -> dispatched p99 (ms) of the commands requested in each ``window_s`` of the phase, in
    order (None for a window with none dispatched): whether a phase's tail is spread over it, or one
    stretch of it (its start, a pause of some part)."""
    sent = [t for t in times if "submitted" in t]
    if not sent:
        return []
    first = min(t["submitted"] for t in sent)
    windows: list[list[float]] = [
        [] for _ in range(int((max(t["submitted"] for t in sent) - first) // window_s) + 1)
    ]
    for t in sent:
        if "dispatched" in t:
            windows[int((t["submitted"] - first) // window_s)].append(t["dispatched"] - t["submitted"])
    return [latency_ms(w)["p99"] if w else None for w in windows]


def reading_account(sent: int, facts: int, coalesced: int, late: int = 0) -> dict[str, int]:
    """Every reading sent is a fact, was coalesced into one, or came after a newer report of its device
    (``late``: the actor's count; no fact, its values older than the twin's): ``unaccounted`` is 0 when
    nothing was lost (more than 0: readings lost; less: the actor counted reports of devices not counted
    in ``sent``)."""
    unaccounted = sent - facts - coalesced - late
    return {"sent": sent, "facts": facts, "coalesced": coalesced, "late": late, "unaccounted": unaccounted}
