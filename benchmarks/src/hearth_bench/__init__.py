"""The benchmarks (``hearth bench <name>``): speed measured against floors measured in the same run.

Its folders are its roles (each one's contents and reasons: its ``__init__.py``); pyproject.toml's
"Benchmark layers" contract, written over them, holds them in order, highest first: ``commands`` >
``benches/`` > ``load/`` > ``figures/`` > ``harness/``; a second keeps the benches independent of one another
but for the runs a few reuse, and no module of a folder is in an import cycle. A new bench is one module in
``benches/`` and one line in ``commands.BENCHES``; no contract lists it.

The root: ``commands``, the ``bench`` command group (this package's ``hearth.commands`` entry point),
which imports a bench's module only when that bench is asked for.
"""
