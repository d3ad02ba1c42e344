"""hearth_device: a small device SDK for Hearth over MQTT (see connection.py)."""

from hearth_device.connection import Command, DeviceConnection, HearthError, tls_context

__all__ = ["Command", "DeviceConnection", "HearthError", "tls_context"]
