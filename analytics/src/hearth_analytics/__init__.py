"""Hearth analytics: PySpark jobs over the journal (``python -m hearth_analytics
stream|batch|runtime|train|learn``, ``hearth analytics ...``).

* ``stream``: windowed telemetry rollups into the compacted rollups topic (``rollups.py`` has the
  record format and the definitions) and streaming training of the anomaly model (``train.py``).
* ``batch``: the daily report per home and device from the whole journal (``batch.py``, ``charts.py``).
* ``runtime``: the runtime report per thermostat, home and local day, to the rollups topic
  (``runtime_report.py``, its pure rules in ``runtime_days.py``).
* ``train``: a full retrain from the whole journal, published to the models topic.
* ``learn``: suggested programs and rooms' responses, published to the home journal (``learn.py``).
* ``archive``: every journal fact into a Parquet table (``archive.py``; its columns, typed per declared
  reading, in ``archive_layout.py``; compaction ``archive_compact.py``; read without Spark by
  ``archive_table.py``).

``spark.py`` builds the session (master, Kafka connector); ``schema.py`` reads the journal;
``settings.py`` holds ``AnalyticsSettings`` (env prefix ``HEARTH_ANALYTICS_``).
"""
