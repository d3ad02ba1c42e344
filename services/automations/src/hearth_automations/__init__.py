"""Hearth's automations service: schedules now; automations, notifications and backtests to come."""
