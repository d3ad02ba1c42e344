"""What the simulated fleet is played with: its rate and the faults of a poor network (``FleetOptions``).

Below everything else of the simulator: the core (fleet_core.py) plays a fleet with them, and each
model's ``for_fleet`` reads its own faults from them (devices/), so a model never imports the core or
the hub's I/O (fleet.py). The layers contract in pyproject.toml keeps it so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hearth_simulator.firmware import FirmwareOptions


@dataclass(frozen=True)
class FleetOptions:
    rate: float = 1.0  # telemetry reports per second per device
    offline_fraction: float = 0.0  # about this share of devices is silent at any time
    offline_s: tuple[float, float] = (90.0, 300.0)  # how long a silence lasts (the actor notices after 60 s)
    ack_delay_s: float = 0.0
    lost_ack_fraction: float = 0.0
    duplicate_fraction: float = 0.0  # reports sent twice
    reorder_fraction: float = 0.0  # reports held back and sent after the next one
    drifting_ids: frozenset[str] = frozenset()  # thermostats whose reading drifts
    drifting_fraction: float = 0.0  # ... or this share of all thermostats
    drift_c_per_h: float | None = None  # how fast a drifting reading drifts (signed); None: ±1-3 °C/h, drawn
    jam_probability: float = 0.0  # per lock move
    fault_rates: Mapping[str, float] = field(default_factory=dict)  # by name, as a model documents them
    seed: int = 0
    client_id: str = "hearth-simulator"  # the journal reader's Kafka client id
    # How long the hub stays silent after another writer's report of a device it plays (FleetCore.learn):
    # longer than any pause in that writer's stream, or the hub would speak between its reports.
    stand_aside_s: float = 30.0
    firmware: FirmwareOptions = field(
        default_factory=FirmwareOptions
    )  # installs, reboots and their failure modes (firmware.py)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("rate must be positive")
        if not 0 <= self.offline_fraction < 1:
            raise ValueError("offline_fraction must be in [0, 1)")
