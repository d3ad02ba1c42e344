"""Hearth analytics."""
