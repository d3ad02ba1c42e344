"""The ports on Kafka: what ``service.ports`` asks for, with a producer behind it (the package's
docstring says what each folder may import)."""
