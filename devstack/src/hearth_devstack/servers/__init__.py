"""The embedded servers, a launcher each: Kafka from Maven Central's jars (its pom and log4j2 files lie
beside ``kafka``, which finds them there) and a KRaft cluster of it, PostgreSQL, Redis (Valkey) and
Mosquitto: a configuration written and a ``ManagedProcess`` that runs it. When and how often they start is
``launch/``'s and the supervisor's business; they import only ``supervision.process`` and ``workspace``."""
