"""How each part of a stack starts, written once for the tests' fixtures, the benchmarks' stacks and
``hearth up``: the embedded servers' start-ups (``server_startup``) and the services as child processes
(``service_processes``, with ``services_running``). Apart from ``local``, because the tests and benches start
the same parts on temporary servers without it; above ``servers/`` and ``supervision/``, which it joins."""
