"""The read models' query: see the package's docstring."""
