"""The read models' store: see the package's docstring."""
