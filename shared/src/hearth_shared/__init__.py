"""Code every Hearth service shares: the event schema, domain rules, topics, settings, Kafka adapter."""
