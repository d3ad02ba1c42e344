"""What every bench stands on: a temporary stack of the dev stack's servers and the services as processes
(``stack``), each bench's parameters declared once (``options``), and the lean HTTP client with its pacing,
percentiles and CPU shares (``load_client``: most benches and the figures use it, so it sits here rather
than in ``load/``). Imports nothing of the other folders."""
