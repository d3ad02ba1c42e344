"""The local stack: embedded Kafka, PostgreSQL, Redis, Mosquitto and the services, supervised
(``hearth up``, ``down``, ``status``); and the synthetic journals the tests and benchmarks fill."""
