"""Hearth read_models."""
