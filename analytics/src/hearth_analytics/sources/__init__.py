"""What the jobs read, as Spark DataFrames: the journal's records and their parsed envelope (``schema``),
the archive table's columns (``archive_layout``, also what the archive job writes), the whole history,
archive then the journal's tail (``history``), the daily report's facts from it (``history_facts``), and
its parts kept per archive day beside the archive (``archive_day_parts``).
Apart from ``jobs/`` because several jobs read the same sources; it imports no job and no session.
"""
