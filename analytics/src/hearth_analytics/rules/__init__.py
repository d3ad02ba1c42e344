"""The pure rules the jobs run inside Spark per home or device: the streaming rollups' windows
(``rollups``) and the runtime report's day figures (``runtime_days``). No Spark, pandas, pyarrow or I/O
(a forbidden contract), so the unit tests call them directly, with no session.
"""
