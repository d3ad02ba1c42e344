"""What a run's notify action sends (the webhook's JSON body), and which recorded notifications have no
delivery fact yet (sent again after a restart, under the same notification id: the home view's
``unsent``, which holds them whatever the runs kept). Pure: reads the definition, the run and the home
view; the ``Notifier`` sends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hearth_shared.domain.automation import Automation
from hearth_shared.domain.home_facts import ActionRecord, RunPayload
from hearth_shared.domain.home_view import HomesView


def notification_content(
    automation: Automation, run: RunPayload, action: ActionRecord
) -> dict[str, Any] | None:
    notify = automation.actions[action.index].notify
    if notify is None:
        return None
    return {
        "notification_id": str(action.action_id),
        "home_id": automation.home_id,
        "automation_id": str(automation.automation_id),
        "automation": automation.name,
        "run_id": str(run.run_id),
        "message": notify.message,
        "trigger": {
            "type": run.trigger.type,
            "device_id": run.trigger.device_id,
            "fact_id": str(run.trigger.fact_id),
            "occurred_at": run.trigger.occurred_at.isoformat(),
        },
    }


def undelivered(
    view: HomesView, owns: Callable[[str], bool]
) -> Iterator[tuple[Automation, RunPayload, ActionRecord]]:
    """The notify actions of recorded runs of owned homes that have no delivery fact."""
    for notification_id, run in list(view.unsent.items()):
        state = view.automations.get(run.automation_id)
        if state is None or not owns(state.definition.home_id):
            continue
        for action in run.actions:
            if action.action_id == notification_id:
                yield state.definition, run, action
