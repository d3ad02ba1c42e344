"""The Hearth device gateway: MQTT <-> Kafka."""
