"""The read models' live: see the package's docstring."""
