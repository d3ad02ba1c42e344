"""Hearth's domain rules: pure functions over a device twin, no I/O.

* ``decide(twin, request, now)`` -> the facts a request leads to (as ``Change``s);
  ``tick(twin, now, offline_after_s=...)`` -> the facts the passing of time leads to.
* ``stamp(twin, changes, ...)`` -> those facts as journal events, numbered version+1, +2, ...
* ``evolve(twin, event)`` -> the twin after one fact; folding a device's journal rebuilds its twin.
* ``detect_anomalies(twin, report, model)`` -> anomaly facts for a reading, scored with the model.
* ``twin_view(twin)`` -> the twin as the contract shows it, with its ``twin_delta``.
* Device types: one module each (thermostat.py, lock.py, light.py), listed in registry.py; what a
  person reads of them (labels, units, what a card leads with) is declared with them (device_card.py).
* Homes, automations and campaigns: their rules (automation*.py, schedule*.py, campaign*.py), the home
  journal's facts (home_facts.py: their payloads are these rules' values, so they are defined here, not in
  ``hearth_shared.schema``) and the folds every reader shares (home_view.py, campaign_book.py).
* What a home learns: programs from manual changes (program_learning.py), each room's response
  (room_response.py) and the preheat the scheduler takes from it (preheat.py).
* ``storable``: whether a decoded fact can be stored and a request acted on (the ids' rule, known types).

Imports only ``hearth_shared.schema`` and the standard library (and msgspec): no I/O.
"""

from hearth_shared.domain.anomaly import DEFAULT_MODEL, detect_anomalies
from hearth_shared.domain.decide import Change, decide, late_report, stamp, tick
from hearth_shared.domain.device_type import CommandInvalid
from hearth_shared.domain.evolve import evolve, older_key_seqs, reports_folded
from hearth_shared.domain.registry import device_type_names, validate_command
from hearth_shared.domain.twin import CommandState, Twin, decode_twin, encode_twin
from hearth_shared.domain.twin_view import twin_delta, twin_view

__all__ = [
    "DEFAULT_MODEL",
    "Change",
    "CommandInvalid",
    "CommandState",
    "Twin",
    "decide",
    "decode_twin",
    "detect_anomalies",
    "device_type_names",
    "encode_twin",
    "evolve",
    "late_report",
    "older_key_seqs",
    "reports_folded",
    "stamp",
    "tick",
    "twin_delta",
    "twin_view",
    "validate_command",
]
