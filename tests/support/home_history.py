"""A home journal with history in it, for the tests of runs and notification outcomes projected into
PostgreSQL: an automation (a command and a notification per run), its runs, and an outcome for each
notification (delivered, or given up for every third), written straight to the home journal as the
automations service writes them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hearth_shared.adapters.settings import StackSettings
from hearth_shared.domain.automation import Action, Automation, CommandAction, NotifyAction, Trigger
from hearth_shared.domain.home_facts import (
    ActionRecord,
    AutomationCreated,
    AutomationRan,
    HomeFact,
    NotificationDelivered,
    NotificationGaveUp,
    NotificationPayload,
    RunPayload,
    TriggerRecord,
    encode_home_fact,
)
from tests.support.topics import produce

T0 = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)


class AutomationHistory:
    """One automation of ``home`` and the facts of its runs, made ``runs`` at a time (``more``)."""

    def __init__(self, home: str) -> None:
        self.home = home
        self.automation = Automation(
            automation_id=uuid.uuid4(),
            home_id=home,
            name="the hall follows the door",
            trigger=Trigger(fact="device.went_offline", device_id="door"),
            actions=(
                Action(command=CommandAction(device_id="hall", name="set_hvac_mode", params={"mode": "off"})),
                Action(notify=NotifyAction(message="the door went offline")),
            ),
            created_at=T0,
        )
        self.at = T0
        self.runs: list[RunPayload] = []  # oldest first
        self.outcomes: dict[str, str] = {}  # notification id -> the outcome's type

    def created(self) -> list[HomeFact]:
        return [self._fact(AutomationCreated, self.automation)]

    def more(self, runs: int, *, outcomes: bool = True) -> list[HomeFact]:
        """``runs`` more runs, each followed by its notification's outcome (unless not ``outcomes``)."""
        facts: list[HomeFact] = []
        for _ in range(runs):
            trigger = TriggerRecord(
                fact_id=uuid.uuid4(), type="device.went_offline", device_id="door", occurred_at=self.at
            )
            notification_id = uuid.uuid4()
            run = RunPayload(
                automation_id=self.automation.automation_id,
                run_id=uuid.uuid4(),
                trigger=trigger,
                conditions=(),
                fired=True,
                admission="start",
                actions=(
                    ActionRecord(
                        index=0,
                        kind="command",
                        action_id=uuid.uuid4(),
                        device_id="hall",
                        name="set_hvac_mode",
                    ),
                    ActionRecord(index=1, kind="notify", action_id=notification_id),
                ),
            )
            self.runs.append(run)
            facts.append(self._fact(AutomationRan, run))
            if outcomes:
                given_up = len(self.runs) % 3 == 0
                kind = NotificationGaveUp if given_up else NotificationDelivered
                payload = NotificationPayload(
                    notification_id=notification_id,
                    automation_id=self.automation.automation_id,
                    attempts=5 if given_up else 1,
                    status=503 if given_up else 204,
                )
                facts.append(self._fact(kind, payload))
                self.outcomes[str(notification_id)] = (
                    "notification.gave_up" if given_up else "notification.delivered"
                )
        return facts

    def _fact(self, kind: type[HomeFact], payload: object) -> HomeFact:
        self.at += timedelta(seconds=10)
        return kind(  # type: ignore[call-arg]
            fact_id=uuid.uuid4(), home_id=self.home, occurred_at=self.at, recorded_at=self.at, payload=payload
        )


async def write_home_facts(stack: StackSettings, facts: list[HomeFact]) -> None:
    """Onto the home journal, keyed by home (a home's facts in one partition, in order)."""
    await produce(
        stack.kafka_bootstrap_servers,
        stack.topics.home_journal,
        [(f.home_id.encode(), encode_home_fact(f)) for f in facts],
    )
