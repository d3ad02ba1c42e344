"""``hearth bench mqtt-clients``: how fast Python MQTT clients receive, each in a process of its own, to
choose the gateway's client on evidence (issue 21).

One Mosquitto; the gateway bench's publisher processes (``mqtt_load publish``) send ``reports`` state
reports at QoS 1 to one subscriber process per client in turn (``python -m hearth_bench.benches.mqtt_clients
CLIENT``), which counts them and acknowledges each (the client's own PUBACK), doing nothing else:

* ``raw``: no library, PUBLISHes parsed by hand, a read's PUBACKs in one write (``mqtt_load count``, the
  gateway bench's floor counter): what Python itself costs;
* ``gmqtt``: ``MqttLink`` with a per-message async handler (the gateway until issue 21: a task and a
  PUBACK write per message);
* ``gmqtt-batched``: ``MqttLink.route_batches`` (the gateway now: a task and a write per read);
* ``paho``: paho-mqtt 2.x (MQTT 5, its network thread, acknowledging when ``on_message`` returns);
* ``awscrt``: the AWS Common Runtime's MQTT 5 client (C; ``on_publish_received`` on its event-loop
  thread, acknowledged when the callback returns). Only when asked for (``--clients awscrt``): on a
  loaded machine its run hung once and was not looked into (2026-11-27).

paho-mqtt and awscrt are not dependencies of the project: a client whose package is not installed is
reported as such (``uv pip install paho-mqtt awscrt`` to measure them). Figures: messages/s from the
first arrival to the last, the subscriber's CPU per message, and each process's CPU share (the broker's
says whether the broker, not the client, was the limit).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from hearth_bench.figures.gateway_figures import Arrivals
from hearth_bench.harness.load_client import cpu_share
from hearth_bench.harness.options import option
from hearth_bench.harness.stack import console
from hearth_bench.load.mqtt_load import LoadProcess
from hearth_devstack.launch.server_startup import start_mosquitto
from hearth_shared.schema.events import utcnow

CLIENTS = ("raw", "gmqtt", "gmqtt-batched", "paho", "awscrt")
DEFAULT_CLIENTS = CLIENTS[:4]  # awscrt hung on a loaded machine once (2026-11-27): asked for by name
NEEDS = {"paho": "paho.mqtt", "awscrt": "awscrt"}  # the module a client needs
ROOT = "hearth/clients"
RECEIVE_MAXIMUM = 20_000  # the gateway's
STALL_S = 20.0


@dataclass(frozen=True)
class MqttClientsBench:
    """MQTT clients: messages/s and CPU per message of one subscriber process per client library."""

    reports: int = option(100_000, "Messages (state reports, QoS 1) each client receives")
    publishers: int = option(2, "Publisher processes")
    clients: tuple[str, ...] = option(
        DEFAULT_CLIENTS, "Clients to measure: raw, gmqtt, gmqtt-batched, paho, awscrt (not by default)"
    )


def main(params: MqttClientsBench) -> dict[str, Any]:
    from hearth_bench.figures.results import write_result

    with tempfile.TemporaryDirectory(prefix="hearth-bench-mqtt-clients-") as tmp:
        started = start_mosquitto(Path(tmp))
        try:
            rows = asyncio.run(_measure(started.server, started.process.pid or 0, params))
        finally:
            started.process.stop()
    for row in rows:
        console.print(row)
    result = {"title": "MQTT clients, receiving (issue 21)", "reports": params.reports, "rows": rows}
    console.print(f"written to {write_result('mqtt-clients', result)}")
    return result


async def _measure(broker: Any, broker_pid: int, params: MqttClientsBench) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    devices = [f"client-bench-{i:04d}" for i in range(1000)]
    per_process = params.reports // params.publishers
    for name in params.clients:
        if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
            rows.append({"client": name, "msg/s": "", "note": f"not installed ({NEEDS[name]})"})
            continue
        job = {
            "host": "127.0.0.1",
            "port": broker.platform_port,
            "username": broker.admin.username,
            "password": broker.admin.password,
            "filter": f"$share/clients-{secrets.token_hex(3)}/{ROOT}/+/state",
            "receive_maximum": RECEIVE_MAXIMUM,
            "expected": per_process * params.publishers,
            "stall_s": STALL_S,
        }
        subscriber = (
            LoadProcess("count", job)
            if name == "raw"
            else LoadProcess(name, job, module="hearth_bench.benches.mqtt_clients")
        )
        publishers: list[LoadProcess] = []
        try:
            if (line := await subscriber.line()) != "ready":
                raise RuntimeError(f"{name}: {line}")
            for p in range(params.publishers):
                ids = devices[p :: params.publishers]
                publishers.append(LoadProcess("publish", _publish_job(job, ids, per_process, p)))
            for publisher in publishers:
                if (line := await publisher.line()) != "ready":
                    raise RuntimeError(f"publisher: {line}")
            processes = {
                "subscriber": subscriber,
                **{f"publisher {i + 1}": p for i, p in enumerate(publishers)},
            }
            before, began = _cpu(processes, broker_pid), time.monotonic()
            subscriber_cpu = subscriber.cpu_seconds()
            for publisher in publishers:
                publisher.say("go")
            answer = json.loads(await subscriber.line())
            subscriber_cpu = subscriber.cpu_seconds() - subscriber_cpu
            share = cpu_share(before, _cpu(processes, broker_pid), time.monotonic() - began)
        finally:
            for process in [subscriber, *publishers]:
                process.close()
        a = Arrivals(answer["received"], answer["first"], answer["last"], answer["first_batch"])
        rows.append(
            {
                "client": name,
                "msg/s": round(a.rate),
                "received": a.count,
                "subscriber CPU µs/msg": round(subscriber_cpu / max(1, a.count) * 1e6, 1),
                "CPU % of one core": share,
            }
        )
    return rows


def _cpu(processes: dict[str, LoadProcess], broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of each process, the broker and the machine (for ``cpu_share``)."""
    used = {n: p.cpu_seconds() for n, p in processes.items()}
    used["mosquitto"] = sum(psutil.Process(broker_pid).cpu_times()[:2])
    machine = psutil.cpu_times()
    used["machine"] = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
    return used


def _publish_job(job: dict[str, Any], ids: list[str], reports: int, index: int) -> dict[str, Any]:
    return {
        "name": f"clients-{index}",
        "host": job["host"],
        "port": job["port"],
        "username": job["username"],
        "password": job["password"],
        "root": ROOT,
        "device_ids": ids,
        "reports": reports,
        "connections": 4,
        "at": utcnow().isoformat(),
    }


# ------------------------------------------------------------------ the subscribers, one per process


class _Count:
    """Arrivals counted from any thread; ``done`` is set when ``expected`` came."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.arrivals = Arrivals()
        self.done = threading.Event()
        self.lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        with self.lock:
            self.arrivals.add(n, time.time())
            if self.arrivals.count >= self.expected:
                self.done.set()

    def wait(self, stall_s: float) -> None:
        """Until ``expected`` came, or nothing (more) for ``stall_s``."""
        since = time.time()
        while not self.done.wait(0.5):
            if time.time() - max(since, self.arrivals.last) > stall_s:
                return

    def answer(self) -> str:
        a = self.arrivals
        return json.dumps(
            {"received": a.count, "first": a.first, "last": a.last, "first_batch": a.first_batch}
        )


async def _gmqtt(job: dict[str, Any], batched: bool) -> str:
    from hearth_shared.adapters.mqtt_link import MqttLink

    count = _Count(int(job["expected"]))
    link = MqttLink(
        client_id=f"bench-clients-{secrets.token_hex(3)}",
        username=job["username"],
        password=job["password"],
        persistent=False,
        receive_maximum=int(job["receive_maximum"]),
    )

    async def one(_topic: str, _payload: bytes) -> None:
        count.add()

    async def batch(messages: list[tuple[str, bytes]]) -> None:
        count.add(len(messages))

    if batched:
        link.route_batches(batch)
    else:
        link.route(one)
    await link.connect(job["host"], int(job["port"]))
    link.subscribe(job["filter"])
    await link.subscribed()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, count.wait, float(job["stall_s"]))
    await link.disconnect()
    return count.answer()


def _paho(job: dict[str, Any]) -> str:
    # Imported by name: paho-mqtt is no dependency (typed where installed, absent where not).
    mqtt: Any = importlib.import_module("paho.mqtt.client")
    properties_module: Any = importlib.import_module("paho.mqtt.properties")

    count = _Count(int(job["expected"]))
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=f"bench-clients-{secrets.token_hex(3)}",
        protocol=mqtt.MQTTv5,
    )
    client.username_pw_set(job["username"], job["password"])
    client.on_subscribe = lambda *_: print("ready", flush=True)
    client.on_message = lambda *_: count.add()
    client.on_connect = lambda c, *_: c.subscribe(job["filter"], qos=1)
    packet_types: Any = importlib.import_module("paho.mqtt.packettypes")
    properties = properties_module.Properties(packet_types.PacketTypes.CONNECT)
    properties.ReceiveMaximum = int(job["receive_maximum"])
    client.connect(job["host"], int(job["port"]), clean_start=True, properties=properties)
    client.loop_start()
    count.wait(float(job["stall_s"]))
    client.disconnect()
    client.loop_stop()
    return count.answer()


def _awscrt(job: dict[str, Any]) -> str:
    from concurrent.futures import Future

    from awscrt import mqtt5

    count = _Count(int(job["expected"]))
    connected: Future[None] = Future()
    client = mqtt5.Client(
        mqtt5.ClientOptions(
            host_name=job["host"],
            port=int(job["port"]),
            connect_options=mqtt5.ConnectPacket(
                client_id=f"bench-clients-{secrets.token_hex(3)}",
                username=job["username"],
                password=job["password"],
                receive_maximum=int(job["receive_maximum"]),
            ),
            session_behavior=mqtt5.ClientSessionBehaviorType.CLEAN,
            on_publish_callback_fn=lambda _data: count.add(),
            on_lifecycle_event_connection_success_fn=lambda _data: connected.set_result(None),
            on_lifecycle_event_connection_failure_fn=lambda data: print(data.exception, file=sys.stderr),
            disable_metrics=True,  # else it appends the SDK's name to the username, and the broker refuses it
        )
    )
    client.start()
    connected.result(30)
    subscription = mqtt5.Subscription(topic_filter=job["filter"], qos=mqtt5.QoS.AT_LEAST_ONCE)
    client.subscribe(mqtt5.SubscribePacket(subscriptions=[subscription])).result(30)
    print("ready", flush=True)
    count.wait(float(job["stall_s"]))
    client.stop()
    return count.answer()


SUBSCRIBERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "paho": _paho,
    "awscrt": _awscrt,
}


def run_subscriber() -> None:
    import uvloop

    client = sys.argv[1]
    job = json.loads(sys.stdin.readline())
    if client in ("gmqtt", "gmqtt-batched"):
        answer = uvloop.run(_gmqtt(job, batched=client == "gmqtt-batched"))
    elif client in SUBSCRIBERS:
        answer = SUBSCRIBERS[client](job)
    else:
        raise SystemExit(f"unknown client {client!r}: one of {', '.join(CLIENTS[1:])}")
    print(answer, flush=True)


if __name__ == "__main__":
    run_subscriber()
