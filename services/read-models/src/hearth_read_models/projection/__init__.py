"""The read models' projection: see the package's docstring."""
