"""The firmware campaign driver (see driver.py)."""
