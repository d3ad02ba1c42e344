"""What the projector writes and the query side reads, declared once: the PostgreSQL view tables and
their migrations, engines and connections, the Redis keys, channels and change message (the package's
docstring says what each folder may import)."""
