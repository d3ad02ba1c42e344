"""Hearth command_api."""
