"""What the tests and benchmarks put through a stack, and how they count what came out: synthetic
journals written fast (``journal_facts``), commands sent as a client sends them with the end of each
(``command_ledger``), the journal read back and checked (``journal_check``). It imports nothing of the dev
stack, so a test or a bench uses it with whichever stack it started."""
