"""The device simulator: deterministic device models (models.py) and the gateway that plays them over
Kafka (fleet.py). ``python -m hearth_simulator`` runs it with settings from the environment."""
