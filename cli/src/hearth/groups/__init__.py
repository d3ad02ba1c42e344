"""The command groups ``cli.py`` adds to ``hearth``, one module a group (``hearth archive``, ``automation``,
``campaign``, ``device``, ``token``). Independent of one another; each takes its clients and helpers
from ``support/``.
"""
