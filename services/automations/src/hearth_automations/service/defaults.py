"""The corrective automations every home gets (switchable off with ``PUT /v1/automations/{id}/enabled``):

* ``anomalous-thermostat``: an ``anomaly.detected`` fact (the analytics model scored a reading as
  anomalous) sets that device to ``hvac_mode: off`` (the safe mode: a thermostat reading nonsense must
  not drive heating or cooling) and notifies the owner, once per episode: its condition is that the
  trigger's device reports an ``hvac_mode`` other than ``off`` (a drifting sensor scores every reading
  as anomalous; once it is off, further anomalies do not act or notify again, and a device without
  ``hvac_mode``, not a thermostat, is left alone), and it is ``single`` (anomalies while its command is
  on its way are dropped);
* ``failed-command``: a ``command.failed`` fact (a jammed lock is one: reason ``device_jammed``)
  notifies the owner;
* ``device-offline``: a ``device.went_offline`` fact (the actor's silence timeout, or the device's MQTT
  will) notifies the owner.

Pure: the definitions, with ids derived from (home, name), so every process and every restart names the
same automation and creating it twice is one automation. ``TRIGGER_DEVICE`` as an action's or a
condition's device means the trigger fact's device. Each is created when the service first sees a
device registered in the home, from that fact's time on (no earlier fact triggers it); seen while the
service replays the journal at start-up (a first start over an old journal), from the moment it
replays, so the past triggers nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from hearth_shared.domain.automation import (
    Action,
    Automation,
    CommandAction,
    Mode,
    NotifyAction,
    StateTest,
    Trigger,
)

DEFAULTS_NAMESPACE = uuid.UUID("c4a1e7d2-8b3f-4f6a-9e0d-1b2c3d4e5f60")
TRIGGER_DEVICE = "$trigger"


def default_id(home_id: str, name: str) -> uuid.UUID:
    return uuid.uuid5(DEFAULTS_NAMESPACE, f"{home_id}\n{name}")


def default_automations(home_id: str, created_at: datetime) -> list[Automation]:
    def make(
        name: str,
        trigger: Trigger,
        *actions: Action,
        mode: Mode = "parallel",
        when: tuple[StateTest, ...] = (),
    ) -> Automation:
        return Automation(
            automation_id=default_id(home_id, name), home_id=home_id, name=name, trigger=trigger,
            conditions=when, actions=actions, mode=mode, created_at=created_at,
        )  # fmt: skip

    return [
        make(
            "anomalous-thermostat",
            Trigger(fact="anomaly.detected"),
            Action(
                command=CommandAction(device_id=TRIGGER_DEVICE, name="set_hvac_mode", params={"mode": "off"})
            ),
            Action(notify=NotifyAction(message="a thermostat's readings are anomalous: it was set to off")),
            mode="single",
            when=(StateTest(device_id=TRIGGER_DEVICE, key="hvac_mode", not_equals="off"),),
        ),
        make(
            "failed-command",
            Trigger(fact="command.failed"),
            Action(
                notify=NotifyAction(message="a device could not carry out a command (e.g. a jammed lock)")
            ),
        ),
        make(
            "device-offline",
            Trigger(fact="device.went_offline"),
            Action(notify=NotifyAction(message="a device went offline")),
        ),
    ]
