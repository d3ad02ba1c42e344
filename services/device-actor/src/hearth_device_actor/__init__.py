"""Hearth device_actor."""
