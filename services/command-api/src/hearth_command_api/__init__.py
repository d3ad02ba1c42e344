"""The command API: HTTP in, requests onto the inbox (and home facts, revocations, campaign requests onto
their topics); it writes no journal fact. Its folders are its roles, held by pyproject.toml's import
contracts over the folders (the same for every service): entry points (``__main__``) > composition root
(``app``) > ``entrypoints/`` > ``adapters/`` > ``service/`` > ``settings``, each importing only from those
below it, and ``service/`` free of any web, broker or database client. A new module goes in the folder
of its role; no contract lists it.

* ``__main__``: ``python -m hearth_command_api`` (uvicorn). ``app``: ``make_app``, which wires Kafka
  (or a test's fakes) behind the ports and mounts the routes; ``/healthz`` is its own.
* ``entrypoints/``: the HTTP routes by group (``routes``: devices and commands; ``credentials``,
  ``admin``, ``tokens``, ``schedules``, ``automations``, ``campaigns``), their request dependencies
  (``deps``) and request and response bodies (``schemas``).
* ``adapters/``: the ports on Kafka (``topic_writer``).
* ``service/``: the ports (``ports``: ``TopicWriter``, ``CaughtUpFeed``) and the device book
  (``device_book``: the devices and commands it answers for, a fold of the journal in memory).
* ``settings``: ``HEARTH_COMMAND_API_``.
"""
