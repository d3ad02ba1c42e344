"""The tests' shared helpers, one job a module (each module's docstring says what it holds and why).

- Waiting: ``waiting`` (``eventually``, the suite's one wait loop; ``poll_until`` and ``twin_when`` on it).
- The platform as tests see it: ``platform`` (token secret, settings, running services; the fixtures
  that start them are in tests/conftest.py), ``identity_stack`` (device identity's own parts),
  ``part_kills`` (a supervised part killed with -9 and awaited until healthy again, for chaos tests).
- Talking to it: ``commands`` and ``registration`` (HTTP), ``inbox_requests`` and ``device_link`` (the
  inbox, for tests that play a device on Kafka), ``inbox_worker`` (a device-actor worker's hot path in
  the test's process), ``mqtt_devices``, ``mosquitto_clients`` and
  ``home_fleet`` (devices over MQTT), ``live_feed`` (the websocket and extra query APIs),
  ``live_browser`` (the live page in Chromium), ``automations`` (webhooks and runs), ``campaigns``.
- Journals and data: ``topics`` (writing and reading a test's topics), ``device_journal``,
  ``engine_facts``, ``known_history`` and ``home_history`` (facts made for a test), ``archive`` (the
  archive job and its table).
- Unit tests only: ``fakes``. Static files: ``compose_file``. The pytest plugins: ``durations`` (each
  run's seconds per test) and ``distribution`` (which tests share an xdist worker, and their order).
"""
