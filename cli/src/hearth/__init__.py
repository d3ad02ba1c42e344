"""Hearth's operator command line, ``hearth`` (see cli.py); the dev packages add their commands to it."""
