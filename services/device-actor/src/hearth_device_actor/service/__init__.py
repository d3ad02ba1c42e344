"""What the device actor does, free of faust and Kafka: decode, decide, record and fold a batch of inbox
requests, check deadlines (``actor``, with its ``Outbox`` port), and coalesce a lagging batch's state
reports (``coalescing``). Imports no broker, web or database client (an import contract)."""
