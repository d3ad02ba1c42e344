"""The local stack: embedded Kafka, PostgreSQL, Redis, Mosquitto and the services, supervised."""
