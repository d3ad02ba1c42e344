"""The automations service: schedules and automations for the homes this process owns (the home journal
and the device journal in; commands to the inbox, run and notification facts to the home journal, signed
webhooks out). Its folders are its roles, held by pyproject.toml's import contracts over the folders (the
same for every service): entry points (``__main__``, ``probe``) > composition root (``app``) >
``adapters/`` > ``service/`` > ``settings``, each importing only from those below it, and ``service/``
free of any web, broker or database client. A new module goes in the folder of its role; no contract
lists it.

* ``__main__``: ``python -m hearth_automations`` (until SIGTERM); ``probe``: its health check (the
  heartbeat file). ``app``: ``AutomationsService``, which wires the service layer to Kafka and the
  webhooks and runs it: the two journal feeds (the home journal read to its end first), the tick of
  the timers, one snapshot of the whole state (why one, and why it decides as a full replay: ``app``).
* ``adapters/``: the ports on Kafka (``command_path``: the inbox and the home journal) and the webhooks
  over HTTP (``webhooks``).
* ``service/``: the decisions, with the ports they need: the scheduler, the engine (its trigger index,
  delayed triggers, rules, run facts and notifications, batched sends), the default automations, the
  notifier, and the service's state as one snapshot (``service_state``).
* ``settings``: ``HEARTH_AUTOMATIONS_``.
"""
