"""The light device type: a dimmable bulb with a colour temperature.

State: ``power`` (on|off), ``brightness_pct`` (1-100), ``color_temp_k`` (2000-6500 K). Commands:
``turn_on`` {brightness_pct?, color_temp_k?, transition_s? (0-60)} desires power on and whatever level
and colour it names (a level left out is the one the bulb had); ``turn_off`` {transition_s?} desires
power off. Both are one setting (``light``): a newer one supersedes an older one not yet dispatched.
``transition_s`` is how the bulb gets there, not where: it is no desired state.

Converged when ``power`` matches, brightness is within 1 and colour temperature within 50 K of what was
asked. A report during a transition (the level on its way) is no divergence: it fails nothing, and the
command converges with the first report within those tolerances. Telemetry: minutes on
(``on_minutes``) and brightness (mean, min, max) are rolled up; nothing is scored (a level is what
someone chose, not a reading that can drift).

Its card leads with a switch and two sliders, brightness and colour temperature (each sends ``turn_on``
with that one level).
"""

from __future__ import annotations

from hearth_shared.domain.device_card import Card, slider, toggle
from hearth_shared.domain.device_type import (
    Command,
    DeviceType,
    Param,
    Setting,
    StateKey,
    StateMinutes,
    Value,
)
from hearth_shared.domain.twin import Twin
from hearth_shared.schema.events import JSON

BRIGHTNESS = Value("integer", 1, 100, unit="%")
COLOR_TEMP = Value("integer", 2000, 6500, unit="K")
TRANSITION = Value("number", 0, 60, unit="s")


def _plan(twin: Twin, command: str, params: JSON) -> tuple[str, JSON]:
    if command == "turn_off":
        return "light", {"power": "off"}
    desired: JSON = {"power": "on"}
    desired.update((key, params[key]) for key in ("brightness_pct", "color_temp_k") if key in params)
    return "light", desired


TYPE = DeviceType(
    name="light",
    label="Light",
    description="A dimmable light with a colour temperature and transitions",
    state=(
        StateKey(
            "power", Value("string", values=("on", "off"), labels={"on": "On", "off": "Off"}), label="Light"
        ),
        StateKey("brightness_pct", BRIGHTNESS, tolerance=1, rollup=True, label="Brightness"),
        StateKey("color_temp_k", COLOR_TEMP, tolerance=50, label="Colour temperature"),
    ),
    commands=(
        Command(
            "turn_on",
            (
                (
                    Param("brightness_pct", BRIGHTNESS, required=False, label="Brightness"),
                    Param("color_temp_k", COLOR_TEMP, required=False, label="Colour temperature"),
                    Param("transition_s", TRANSITION, required=False, label="Transition"),
                ),
            ),
            "On, at a level and colour if given, over transition_s seconds",
            label="Turn on",
        ),
        Command(
            "turn_off",
            ((Param("transition_s", TRANSITION, required=False, label="Transition"),),),
            "Off, fading over transition_s seconds",
            label="Turn off",
        ),
    ),
    card=Card(
        controls=(
            toggle("power", "on", "turn_on", "turn_off", switch=True),
            slider("brightness_pct", "turn_on", "brightness_pct"),
            slider("color_temp_k", "turn_on", "color_temp_k"),
        ),
    ),
    settings=(Setting("light"),),
    plan=_plan,
    initial_reported={"power": "off"},
    minutes=(StateMinutes("on_minutes", "power", ("on",)),),
)
