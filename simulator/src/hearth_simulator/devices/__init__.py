"""One simulated model per device type: ``devices/sim_<type name>.py`` defines ``MODEL`` (models.py)."""
