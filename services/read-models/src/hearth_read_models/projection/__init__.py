"""The live projector: the journal (and the rollups and the home journal) into the views and the Redis cache,
exactly once into PostgreSQL (the package's docstring says what each folder may import)."""
