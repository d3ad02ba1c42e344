"""The daily report's figures: its columns and Spark expressions per declared type (``daily_figures``)
and the PNG charts drawn from them (``charts``, matplotlib). Apart from ``jobs/batch`` because they are
derived from the device types' declarations, not from the job's plumbing; they read no source.
"""
