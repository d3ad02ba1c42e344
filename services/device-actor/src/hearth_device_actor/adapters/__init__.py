"""The worker's I/O: the twins' faust table and the journal outbox (``twin_table``, ``kafka_outbox``), the
journal catch-up after a partition changes hands (``catch_up``), faust's consumer kept in its group
(``keep_fetching``) and the serving file its health check reads (``serving``). Imports ``service/`` (the
ports it implements), never ``entrypoints/``."""
