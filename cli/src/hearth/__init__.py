"""Hearth's operator command line, ``hearth``: the app (``cli.py``) at the root, its command groups in
``groups/``, and what they share in ``support/``. pyproject.toml's "CLI layers" contract holds them in
that order (``cli`` > ``groups/`` > ``support/``). The dev packages add their commands to it.
"""
