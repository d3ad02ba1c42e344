"""The facts the engine writes about what it decided: ``automation.ran`` (a run, fired or not, with its
conditions, admission and actions) and ``automation.suspended`` (the loop breaker's reason). Ids are
derived: the run's from (automation, trigger fact), a suspension's from the trigger fact, so a replay
that decides again writes the same facts."""

from __future__ import annotations

import uuid
from datetime import datetime

from hearth_shared.domain.automation import Automation
from hearth_shared.domain.home_facts import (
    ActionRecord,
    AutomationRan,
    AutomationSuspended,
    RunPayload,
    SuspendedPayload,
    TriggerRecord,
)

SUSPENSION_DETAILS = {
    "own_action": "{type} of {device_id} was caused by this automation's own command",
    "too_many_runs": "more than {max_runs} runs in a minute",
}


def ran_fact(
    automation: Automation,
    rid: uuid.UUID,
    trigger: TriggerRecord,
    *,
    conditions: list[bool],
    admission: str,
    actions: list[ActionRecord],
    now: datetime,
) -> AutomationRan:
    fired = all(conditions) and admission == "start"
    return AutomationRan(
        fact_id=rid,
        home_id=automation.home_id,
        occurred_at=now,
        recorded_at=now,
        causation_id=trigger.fact_id,
        payload=RunPayload(
            automation_id=automation.automation_id,
            run_id=rid,
            trigger=trigger,
            conditions=tuple(conditions),
            fired=fired,
            admission=admission,
            actions=tuple(actions),
        ),
    )


def suspended_fact(
    automation: Automation, trigger: TriggerRecord, reason: str, now: datetime
) -> AutomationSuspended:
    detail = SUSPENSION_DETAILS[reason].format(
        type=trigger.type, device_id=trigger.device_id, max_runs=automation.max_runs_per_minute
    )
    return AutomationSuspended(
        fact_id=uuid.uuid5(automation.automation_id, f"suspended\n{trigger.fact_id}"),
        home_id=automation.home_id,
        occurred_at=now,
        recorded_at=now,
        causation_id=trigger.fact_id,
        payload=SuspendedPayload(
            automation_id=automation.automation_id,
            reason=reason,
            detail=detail,
            trigger_fact_id=trigger.fact_id,
        ),
    )
