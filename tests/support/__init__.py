"""The tests' shared helpers (see each module's docstring)."""
