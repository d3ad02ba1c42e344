"""hearth_device: a small device SDK for Hearth over MQTT."""
