"""The archive table's committed files without Spark (the standard library, pyarrow, numpy): read
(``archive_table``), checked against the journal (``archive_check``) and compacted (``archive_compact``).
``hearth archive verify|status|compact``, the dev stack and the archive job use them; they import no
Spark (a forbidden contract), so the ``hearth archive`` commands start in a second.
"""
