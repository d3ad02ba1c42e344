"""The read models' rebuild: see the package's docstring."""
