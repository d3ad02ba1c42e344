"""The firmware campaign driver: runs firmware campaigns, one step at a time, each step a campaign fact,
reaching devices only through ``submit_command`` requests on the inbox (entrypoints/driver.py says why a
service of its own, and how it survives restarts).

The package's top holds the process: ``__main__`` (``python -m hearth_campaigns``), ``probe`` (its health
check), ``app`` (the composition root) and ``settings``. Below it, folders by role, each importing only
those after it (pyproject.toml's "Service layers" contract, the same for every service):
``entrypoints/``, ``service/``. A new module goes in the folder of its role; no contract lists it.
"""
