"""The simulated models, found by device type name: ``hearth_simulator.devices.sim_<type name>.MODEL``.

The domain stays free of simulation, so a type's model lives here, in the dev tools; nothing lists the
models by hand: every type of the domain registry is looked up by its name, and
tests/unit/test_device_type_plugins.py fails for a type without one.
"""

from __future__ import annotations

import importlib

from hearth_shared.domain.registry import DEVICE_TYPES
from hearth_simulator.sim_device import SimDevice


def _find_models() -> dict[str, type[SimDevice]]:
    found: dict[str, type[SimDevice]] = {}
    for name in DEVICE_TYPES:
        try:
            module = importlib.import_module(f"hearth_simulator.devices.sim_{name}")
        except ModuleNotFoundError as missing:
            if missing.name != f"hearth_simulator.devices.sim_{name}":
                raise
            continue  # a type the simulator cannot play (the guard test says so)
        model: type[SimDevice] = module.MODEL
        found[model.device_type] = model
    return found


SIM_MODELS: dict[str, type[SimDevice]] = _find_models()
"""The device types the simulator can play, by their domain name."""

__all__ = ["SIM_MODELS", "SimDevice"]
