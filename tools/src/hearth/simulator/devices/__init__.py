"""One simulated model per device type: ``devices/<type name>.py`` defines ``MODEL`` (models.py)."""
