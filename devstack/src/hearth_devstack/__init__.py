"""The local stack, and what the tests and benchmarks start and count with: embedded Kafka, PostgreSQL,
Redis and Mosquitto with the services, supervised (``hearth up``, ``down``, ``status``), the same servers
and services on temporary ports for a test or a bench, and the synthetic journals and counts they use.

Its folders are its roles (each one's contents and reasons: its ``__init__.py``); pyproject.toml's "Dev
stack layers" contract, written over them, holds them in order, highest first: ``commands`` > ``local`` >
``launch/`` > ``servers/`` > ``supervision/`` > ``waiting | workload/ | workspace`` ("a | b": neither
imports the other), and no module of a folder is in an import cycle. A new module goes in the folder of
its role; no contract lists it.

The root: ``commands`` (``hearth up``, ``down`` and ``status``: this package's ``hearth.commands`` entry
point), ``local`` (the local stack ``hearth up`` runs: servers and services on fixed ports under
``.hearth/``, under the supervisor), ``waiting`` (``eventually`` and ``poll_until``, the one wait loop the
tests, chaos tests and benchmarks share) and ``workspace`` (where the checkout is).
"""
