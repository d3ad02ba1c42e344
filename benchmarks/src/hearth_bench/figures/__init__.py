"""What a run's measurements become: the pure figures of the gateway, learn and mixed benches (no I/O, no
clock: unit-tested without a stack), the gateway's report, and ``results``, which writes each bench's
``bench/results/<name>.json`` and its section of docs/BENCHMARKS.md. Below ``load/``, whose MQTT load
publishes the state reports ``gateway_figures`` defines and counts arrivals with it."""
