"""What the benches drive a stack with: fleets and their readings, devices held connected, MQTT publishers
and counters with their hand-built packets, websocket and Redis subscribers, weeks of households written
into a journal, the automations' live run and faust's own floor. Here, not in a bench's module, because
two benches share it or it runs as processes of its own (``python -m``, spawned)."""
