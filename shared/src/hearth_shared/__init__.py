"""Code every Hearth part shares, in four folders by role (each folder imports only from those below it):

* ``web/``: the HTTP APIs' shared edge (bearer-token dependency, error answers, body limit); FastAPI.
* ``adapters/``: Kafka (producer and consumer set-up, topics, ``TopicFollower``, snapshot store, the home
  journal, revocation and campaign feeds, probes), MQTT (``MqttLink``), the archive's commit log, and
  ``StackSettings``: where the broker, database and cache are, which only the adapters' callers need.
* ``domain/``: pure rules and folds: decide/evolve over a device twin, device types, automations,
  schedules, campaigns, the home and campaign folds, and which decoded records can be stored. Home facts
  live here, not in ``schema``: their payloads are the domain's own values (an ``Automation``, a
  ``ProgramEntry``), so the home journal's records are defined where those are.
* ``schema/``: the shapes Hearth writes and reads: journal facts, inbox requests and their envelope, other
  topics' records (the runtime report's among them: ``runtime_records``), campaign facts, MQTT payloads,
  API tokens and their revocations, device secret hashes, ids and the snapshot format. msgspec and the
  standard library only.

``schema`` and ``domain`` are the dependency-light part (no web, broker or database client: an import
contract in pyproject.toml holds it), which the device SDK and analytics use with the adapters they
need (MQTT; Kafka) and without the rest.
"""
