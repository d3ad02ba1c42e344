"""The device actor: the one writer of the journal. A faust worker that holds a share of the twins,
reads the inbox partitions with the same numbers in batches, decides each request with the domain's pure
functions and appends the facts, then writes the twins.

The package's top holds the process: ``__main__`` (``python -m hearth_device_actor``), ``probe`` (its
health check), ``app`` (the composition root: the faust app, its services and timers) and ``settings``.
Below it, folders by role, each importing only those after it (pyproject.toml's "Service layers"
contract, the same for every service): ``entrypoints/`` (the inbox feed that drives the worker),
``adapters/`` (Kafka, faust and the serving file on disk), ``service/`` (the actors' decisions and
bookkeeping, free of any broker client, so unit tests cover them with fakes). A new module goes in the
folder of its role; no contract lists it.
"""
