"""The Spark jobs: one module a job, each a ``run_*`` that ``__main__`` dispatches (``stream``, ``archive``,
``batch``, ``runtime_report``, ``train``, ``learn``), and ``automation_backtest``, which ``hearth automation
backtest --spark`` runs in its own process. ``train`` is here because it is a job (the full retrain); the
stream job's training query reuses its ``ModelTrainer``, the one import between jobs. The top layer below
``__main__``: a job takes what it reads from ``sources/``, its pure rules from ``rules/``, its session
from ``spark``.
"""
