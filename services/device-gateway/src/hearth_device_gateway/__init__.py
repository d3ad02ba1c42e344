"""The device gateway: MQTT <-> Kafka. Devices' messages to the inbox (or a dead letter and an ``errors``
answer), dispatched commands to devices; and, beside each broker, the broker-access follower that keeps the
broker's password and ACL files equal to the journal's facts.

The package's top holds the processes: ``__main__`` (``python -m hearth_device_gateway``, a gateway),
``broker_access`` (``python -m hearth_device_gateway.broker_access``, a broker's access follower),
``probe`` (the gateway's health check), ``app`` (the composition roots: ``make_app``, ``make_follower``)
and ``settings``. Below it, folders by role, each importing only those after it (pyproject.toml's
"Service layers" contract, the same for every service): ``entrypoints/``, ``adapters/``, ``service/``.
A new module goes in the folder of its role; no contract lists it.
"""
