"""Processes kept running: one supervised process (``process``), the supervisor (restarts with backoff,
gives up on a crash loop), the order parts stop in, the status file ``hearth status`` reads, what an
unclean stop left behind (``stale``), a part killed -9 and healthy again (``part_kill``), and the ports
parts listen on (``ports``: a user's checked free, free ones for test and bench stacks). Parts come to
it as ``PartSpec``s, so it imports no server or service, and its policy is unit-tested with fakes."""
