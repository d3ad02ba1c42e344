"""Hearth analytics: PySpark jobs over the journal (``python -m hearth_analytics
stream|archive|batch|runtime|train|learn``, ``hearth analytics ...``).

Its folders are its roles (each one's contents and reasons: its ``__init__.py``); pyproject.toml's
"Analytics layers" contract, written over them, holds them in order, highest first: ``__main__`` >
``jobs/`` > ``figures/ | sources/ | spark`` > ``archive_files/ | rules/ | s3`` > ``settings`` ("a | b":
neither imports the other), and no module of a folder is in an import cycle. ``archive_files/`` and
``rules/`` import no Spark (a forbidden contract each). A new module goes in the folder of its role.

* ``jobs/``: the Spark jobs ``__main__`` dispatches, and the automation backtest ``hearth automation
  backtest --spark`` runs.
* ``sources/``: what the jobs read: the journal's records as Spark sees them (``schema``), the archive's
  columns (``archive_layout``), the history (archive, then the journal's tail) and its report facts.
* ``figures/``: the daily report's figures per declared type, and its charts.
* ``archive_files/``: the archive table's committed files without Spark: read, checked, compacted.
* ``rules/``: the pure rules the jobs run per home or device (the streaming rollups, the runtime days).

At the root: ``__main__`` (spark-submit runs it by path, so it stays here), ``spark`` (the session every
job builds), ``s3`` (that session's s3a part, for an archive on S3) and ``settings``
(``AnalyticsSettings``, env prefix ``HEARTH_ANALYTICS_``).
"""
