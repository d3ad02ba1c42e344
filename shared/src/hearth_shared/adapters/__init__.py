"""What connects Hearth to its broker and files: Kafka (``kafka``, ``topics``, ``topic_follower``,
``snapshots``, ``home_journal``, ``revocations``, ``campaign_feed``, ``probe``), MQTT (``mqtt_link``), the
archive's commit log (``archive_log``) and its files, local or on S3 (``archive_store``), a service
process's stop on SIGINT or SIGTERM (``stop_signals``) and its garbage collector's policy
(``collector``), and ``settings`` (``StackSettings``), which says where the broker, database and cache
are and names the topics: it configures these adapters and the services that wire them, so it sits here
and not in ``schema`` (the light part stays free of pydantic-settings and environment)."""
