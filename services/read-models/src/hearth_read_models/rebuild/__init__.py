"""Rebuild and verify: the journal (or its archive) replayed into a fresh schema, checked, then swapped in
or compared with the live views (the package's docstring says what each folder may import)."""
