"""The local stack: embedded Kafka, PostgreSQL, Redis and Mosquitto, and the services, as supervised processes."""
