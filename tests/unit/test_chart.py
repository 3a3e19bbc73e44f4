"""Offline checks of the deployment files: the Helm chart, docker-compose.yml and the collector config.

The chart is linted and rendered with Helm's own library (helm-python-sdk, no helm binary, no cluster),
with its default values and with `ci/production-values.yaml`. Every rendered manifest is validated
against the Kubernetes 1.31 OpenAPI schemas (kubernetes-validate, strict: unknown fields fail), except
the custom resources of KEDA and the Prometheus Operator, whose schemas ship with those operators and
not with Kubernetes: they get structural checks here instead. The optional NATS, Temporal and Qdrant
subcharts are never downloaded: the chart must lint and render without them.
"""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import compose_spec
import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from evoskill.platform.config import SERVICES, Settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "evoskill"
PRODUCTION_VALUES = CHART / "ci" / "production-values.yaml"
KUBE_VERSION = "1.31.0"
RELEASE, NAMESPACE = "evoskill", "ml"
# Custom resources: no schema in kubernetes-validate (they come with the KEDA / Prometheus operators).
CUSTOM_RESOURCES = {("keda.sh/v1alpha1", "ScaledObject"), ("monitoring.coreos.com/v1", "ServiceMonitor")}
STATEFUL = {"learner"}
MISSING_SUBCHARTS = "chart directory is missing these dependencies"
PER_SERVICE_KINDS = (
    "Deployment",
    "Service",
    "ServiceAccount",
    "ConfigMap",
    "PodDisruptionBudget",
    "NetworkPolicy",
)
PROBES = {"startupProbe": "startup", "livenessProbe": "liveness", "readinessProbe": "readiness"}

Manifest = dict[str, Any]


def default_port(service: str) -> int:
    factory = Settings.model_fields[f"{service}_endpoint"].default_factory
    assert factory is not None
    return int(factory().port)  # type: ignore[call-arg]


@cache
def chart_dir() -> Path:
    """The chart without any subcharts that a local `helm dependency build` may have downloaded."""
    if not (CHART / "charts").exists():
        return CHART
    target = Path(tempfile.mkdtemp(prefix="evoskill-chart-")) / "evoskill"
    shutil.copytree(CHART, target, ignore=lambda folder, _: ["charts"] if Path(folder) == CHART else [])
    atexit.register(shutil.rmtree, target.parent, True)
    return target


def production_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(PRODUCTION_VALUES.read_text())
    return values


@cache
def rendered(profile: str) -> tuple[Manifest, ...]:
    values = production_values() if profile == "production" else None
    with helm.Chart.load(chart_dir()) as chart:
        files = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs: list[Manifest] = []
    for path, text in sorted(files.items()):
        if path.endswith(".yaml"):
            docs += [doc for doc in yaml.safe_load_all(text) if doc]
    return tuple(docs)


def find(profile: str, kind: str, name: str) -> Manifest | None:
    return next((d for d in rendered(profile) if d["kind"] == kind and d["metadata"]["name"] == name), None)


def get(profile: str, kind: str, name: str) -> Manifest:
    doc = find(profile, kind, name)
    assert doc is not None, f"{profile}: no {kind} {name}"
    return doc


@cache
def merged_values(profile: str, service: str) -> dict[str, Any]:
    """What the chart should have used for one service: serviceDefaults overlaid with services.<name>."""
    with helm.Chart.load(chart_dir()) as chart:
        values = chart.merge_values(production_values() if profile == "production" else None)

    def overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in over.items():
            both_maps = isinstance(value, dict) and isinstance(out.get(key), dict)
            out[key] = overlay(out[key], value) if both_maps else value
        return out

    return overlay(values["serviceDefaults"], values["services"][service] or {})


def target(name: str) -> dict[str, str]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}


def container(deployment: Manifest) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result


PROFILES = ("default", "production")
profiles = pytest.mark.parametrize("profile", PROFILES)
each_service = pytest.mark.parametrize("service", SERVICES)


# ----------------------------------------------------------------------------- lint and schema


@profiles
def test_chart_lints_clean_without_the_optional_subcharts(profile: str) -> None:
    values = production_values() if profile == "production" else None
    report = helm.lint(chart_dir(), values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}")
    problems = [m for m in report["messages"] if m["severity"] >= 2 and MISSING_SUBCHARTS not in m["error"]]
    assert problems == []
    assert [e for e in report["errors"] if MISSING_SUBCHARTS not in e] == []


def test_subcharts_are_optional_and_off_by_default() -> None:
    metadata = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    names = {dep["name"] for dep in metadata["dependencies"]}
    assert names == {"nats", "temporal", "qdrant"}
    for dep in metadata["dependencies"]:
        assert dep["condition"] == f"{dep['name']}.enabled"
        assert values[dep["name"]]["enabled"] is False
    # the renders in this file run without them
    assert not (chart_dir() / "charts").exists()


@profiles
def test_every_manifest_validates_against_kubernetes(profile: str) -> None:
    checked = 0
    for doc in rendered(profile):
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_RESOURCES:
            assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}, name
            assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE, name
            continue
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{profile}: {name} is invalid for Kubernetes {KUBE_VERSION}: {path}: {exc.message}")
        checked += 1
    assert checked >= 6 * 6


@profiles
def test_resource_names_are_unique(profile: str) -> None:
    keys = [(d["kind"], d["metadata"]["name"]) for d in rendered(profile)]
    assert len(keys) == len(set(keys))


# ----------------------------------------------------------------------------- per service


@profiles
@each_service
def test_each_service_has_its_objects(profile: str, service: str) -> None:
    name = f"{RELEASE}-{service}"
    for kind in PER_SERVICE_KINDS:
        get(profile, kind, name)
    svc = get(profile, "Service", name)
    assert svc["spec"]["ports"] == [
        {
            "name": "grpc",
            "port": default_port(service),
            "targetPort": "grpc",
            "protocol": "TCP",
            "appProtocol": "grpc",
        }
    ]
    pod = get(profile, "Deployment", name)["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["serviceAccountName"] == name
    assert container(get(profile, "Deployment", name))["args"] == [service]


@profiles
@each_service
def test_grpc_probes_use_the_service_port(profile: str, service: str) -> None:
    c = container(get(profile, "Deployment", f"{RELEASE}-{service}"))
    port = default_port(service)
    assert c["ports"] == [{"name": "grpc", "containerPort": port, "protocol": "TCP"}]
    probes = merged_values(profile, service)["probes"]
    for probe, key in PROBES.items():
        assert c[probe] == {"grpc": {"port": port}, **probes[key]}, probe


@profiles
@each_service
def test_resources_and_security_context(profile: str, service: str) -> None:
    deployment = get(profile, "Deployment", f"{RELEASE}-{service}")
    pod = deployment["spec"]["template"]["spec"]
    c = container(deployment)
    assert c["resources"] == merged_values(profile, service)["resources"]
    assert c["resources"]["requests"] and c["resources"]["limits"]
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's USER (deploy/Dockerfile)
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"] if m["name"] != "nats-tls"}  # read-only
    assert mounts == {"tmp": "/tmp", "state": "/var/lib/evoskill"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["tmp"]
    if service in STATEFUL:
        claim = volumes["state"]["persistentVolumeClaim"]["claimName"]
        get(profile, "PersistentVolumeClaim", claim)
    else:
        assert "emptyDir" in volumes["state"]


@profiles
@each_service
def test_autoscaling(profile: str, service: str) -> None:
    name = f"{RELEASE}-{service}"
    cfg = merged_values(profile, service)
    deployment = get(profile, "Deployment", name)
    hpa = find(profile, "HorizontalPodAutoscaler", name)
    scaled = find(profile, "ScaledObject", name)
    if service in STATEFUL:
        # one replica on its own volume, replaced not rolled, never autoscaled
        assert hpa is None and scaled is None
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}
        return
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert "replicas" not in deployment["spec"]  # the HPA (or KEDA's HPA) owns the count
    if cfg["keda"]["enabled"]:
        assert hpa is None, "KEDA creates its own HPA; two would fight"
        assert scaled is not None
        assert scaled["spec"]["scaleTargetRef"] == target(name)
        assert scaled["spec"]["minReplicaCount"] == cfg["keda"]["minReplicas"]
        assert scaled["spec"]["maxReplicaCount"] == cfg["keda"]["maxReplicas"]
        return
    assert scaled is None
    assert hpa is not None
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == target(name)
    assert hpa["spec"]["minReplicas"] == cfg["autoscaling"]["minReplicas"]
    assert hpa["spec"]["maxReplicas"] == cfg["autoscaling"]["maxReplicas"]
    cpu = next(m for m in hpa["spec"]["metrics"] if m["resource"]["name"] == "cpu")
    assert cpu["resource"]["target"] == {
        "type": "Utilization",
        "averageUtilization": cfg["autoscaling"]["targetCPUUtilizationPercentage"],
    }


@profiles
@each_service
def test_pod_disruption_budget(profile: str, service: str) -> None:
    name = f"{RELEASE}-{service}"
    pdb = get(profile, "PodDisruptionBudget", name)["spec"]
    cfg = merged_values(profile, service)["pdb"]
    if cfg["minAvailable"] != "":
        assert pdb["minAvailable"] == cfg["minAvailable"] and "maxUnavailable" not in pdb
    else:
        assert pdb["maxUnavailable"] == cfg["maxUnavailable"] and "minAvailable" not in pdb
    labels = get(profile, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    if service in STATEFUL:
        # a single replica with minAvailable 1 would block every node drain
        assert pdb.get("maxUnavailable") == 1


@profiles
@each_service
def test_network_policy_admits_only_evoskill_pods_on_grpc(profile: str, service: str) -> None:
    policy = get(profile, "NetworkPolicy", f"{RELEASE}-{service}")["spec"]
    first = policy["ingress"][0]
    assert first["ports"] == [{"port": "grpc", "protocol": "TCP"}]
    allowed = merged_values(profile, service)["networkPolicy"]["allowFrom"]
    selectors = [peer["podSelector"]["matchLabels"] for peer in first["from"]]
    if allowed:
        assert [s["app.kubernetes.io/component"] for s in selectors] == allowed
    else:
        assert selectors == [{"app.kubernetes.io/name": "evoskill", "app.kubernetes.io/instance": RELEASE}]


@profiles
@each_service
def test_configmap_wires_servers_and_peers(profile: str, service: str) -> None:
    data = get(profile, "ConfigMap", f"{RELEASE}-{service}")["data"]
    # every value is a string that pydantic-settings parses into the typed Settings
    settings = Settings(**_settings_kwargs(data))
    assert data["EVOSKILL_BIND_HOST"] == "0.0.0.0"
    for peer in SERVICES:
        endpoint = settings.endpoint(peer)
        assert (endpoint.host, endpoint.port) == (f"{RELEASE}-{peer}", default_port(peer))
        get(profile, "Service", endpoint.host)
    assert str(settings.state_dir) == "/var/lib/evoskill"
    if profile == "production":
        servers = production_values()["externalServers"]
        assert settings.nats.url == servers["nats"]["url"]
        assert settings.temporal.address == servers["temporal"]["address"]
        assert settings.temporal.namespace == servers["temporal"]["namespace"]
        assert settings.qdrant.url == servers["qdrant"]["url"]
    else:  # the Service names of the official charts installed as subcharts or beside the release
        assert settings.nats.url == f"nats://{RELEASE}-nats:4222"
        assert settings.temporal.address == f"{RELEASE}-temporal-frontend:7233"
        assert settings.qdrant.url == f"http://{RELEASE}-qdrant:6333"
    assert settings.telemetry.otlp_endpoint == f"http://{RELEASE}-otel-collector:4317"
    get(profile, "Service", f"{RELEASE}-otel-collector")


@profiles
@each_service
def test_each_pod_advertises_its_own_ip_and_the_sandbox_service_is_headless(profile: str, service: str) -> None:
    env = {e["name"]: e for e in container(get(profile, "Deployment", f"{RELEASE}-{service}"))["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env[f"EVOSKILL_{service.upper()}_ENDPOINT__ADVERTISE_HOST"]["value"] == "$(POD_IP)"
    spec = get(profile, "Service", f"{RELEASE}-{service}")["spec"]
    # Session ids name the sandbox pod's IP: its Service's DNS name must list the pods, not one virtual IP.
    assert (spec.get("clusterIP") == "None") == (service == "sandbox")


def _settings_kwargs(data: dict[str, str]) -> dict[str, Any]:
    """EVOSKILL_A__B=value -> {"a": {"b": value}}, the way the env source nests them."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        parts = key.removeprefix("EVOSKILL_").lower().split("__")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


# ----------------------------------------------------------------------------- production extras


@pytest.mark.parametrize("service", ["reward", "memory"])
def test_keda_scales_consumers_on_jetstream_lag(service: str) -> None:
    scaled = get("production", "ScaledObject", f"{RELEASE}-{service}")
    cfg = merged_values("production", service)["keda"]
    servers = production_values()["externalServers"]["nats"]
    lag = [t for t in scaled["spec"]["triggers"] if t["type"] == "nats-jetstream"]
    assert [t["metadata"]["consumer"] for t in lag] == cfg["consumers"]
    for trigger in lag:
        meta = trigger["metadata"]
        # durable consumer names follow the bus' convention: <service>-<subject with dashes>
        assert meta["consumer"].startswith(f"{service}-")
        assert meta["stream"] == "EVOSKILL"
        assert meta["account"] == "$G"
        assert meta["natsServerMonitoringEndpoint"] == servers["monitoringEndpoint"]
        assert meta["lagThreshold"] == str(cfg["lagThreshold"])
        assert all(isinstance(v, str) for v in meta.values())  # KEDA metadata is a string map


def test_service_monitor_scrapes_the_collector() -> None:
    monitor = get("production", "ServiceMonitor", f"{RELEASE}-otel-collector")
    service = get("production", "Service", f"{RELEASE}-otel-collector")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert find("default", "ServiceMonitor", f"{RELEASE}-otel-collector") is None


def test_qdrant_api_key_reaches_only_the_memory_service() -> None:
    for service in SERVICES:
        deployment = get("production", "Deployment", f"{RELEASE}-{service}")
        env = {e["name"]: e for e in container(deployment)["env"]}
        if service == "memory":
            assert env["EVOSKILL_QDRANT__API_KEY"]["valueFrom"]["secretKeyRef"] == {
                "name": "qdrant-api-key",
                "key": "api-key",
            }
        else:
            assert "EVOSKILL_QDRANT__API_KEY" not in env


def test_nats_credentials_and_certificates_come_from_secrets_never_from_values() -> None:
    for service in SERVICES:
        deployment = get("production", "Deployment", f"{RELEASE}-{service}")
        env = {e["name"]: e for e in container(deployment)["env"]}
        assert env["EVOSKILL_NATS__USER"]["value"] == service  # its own user, with its own permissions
        assert env["EVOSKILL_NATS__PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": "evoskill-nats-passwords", "key": service}
        mount = next(m for m in container(deployment)["volumeMounts"] if m["name"] == "nats-tls")
        assert mount["readOnly"] and mount["mountPath"] == "/etc/evoskill/nats-tls"
        volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "nats-tls")
        assert volume["secret"]["secretName"] == "evoskill-nats-tls"
        config = get("production", "ConfigMap", f"{RELEASE}-{service}")["data"]
        assert {k: v for k, v in config.items() if k.startswith("EVOSKILL_NATS__TLS__")} == {
            f"EVOSKILL_NATS__TLS__{name}": f"/etc/evoskill/nats-tls/{file}"
            for name, file in (("CA", "ca.crt"), ("CERT", "tls.crt"), ("KEY", "tls.key"))}
        assert not {"EVOSKILL_NATS__PASSWORD", "EVOSKILL_QDRANT__API_KEY"} & set(config)
    plain = get("default", "Deployment", f"{RELEASE}-planner")
    assert not {"EVOSKILL_NATS__USER", "EVOSKILL_NATS__PASSWORD"} & {e["name"] for e in container(plain)["env"]}
    assert "nats-tls" not in {v["name"] for v in plain["spec"]["template"]["spec"]["volumes"]}


@pytest.mark.parametrize(
    "override",
    [
        {"autoscaling": {"enabled": True}},
        {"keda": {"enabled": True, "consumers": ["learner-episode-completed"]}},
        {"replicas": 2},
    ],
    ids=["hpa", "keda", "replicas"],
)
def test_the_stateful_learner_cannot_be_scaled_out(override: dict[str, Any]) -> None:
    with helm.Chart.load(chart_dir()) as chart, pytest.raises(helm.HelmError, match="stateful"):
        chart.render({"services": {"learner": override}}, name=RELEASE, namespace=NAMESPACE)


def test_a_service_can_switch_off_what_the_defaults_switch_on() -> None:
    with helm.Chart.load(chart_dir()) as chart:
        files = chart.render(
            {"services": {"planner": {"autoscaling": {"enabled": False}, "pdb": {"enabled": False}}}},
            name=RELEASE,
            namespace=NAMESPACE,
        )
    docs = [yaml.safe_load_all(text) for path, text in files.items() if path.endswith(".yaml")]
    kinds = {d["kind"] for stream in docs for d in stream if d and d["metadata"]["name"] == f"{RELEASE}-planner"}
    assert "HorizontalPodAutoscaler" not in kinds and "PodDisruptionBudget" not in kinds
    assert "Deployment" in kinds


# ----------------------------------------------------------------------------- values documentation


def _undocumented_keys(text: str) -> Iterator[str]:
    """Keys of values.yaml with no comment right above them or above one of their parents."""
    stack: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    previous_is_comment = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            previous_is_comment = True
            continue
        match = re.match(r"^( *)([A-Za-z_][\w.-]*):", line)
        if not match or not stripped:
            previous_is_comment = previous_is_comment and not stripped
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        documented = previous_is_comment or any(doc for _, doc in stack)
        if not documented:
            yield match.group(2)
        stack.append((indent, previous_is_comment))
        previous_is_comment = False


def test_every_value_is_documented() -> None:
    undocumented = list(_undocumented_keys((CHART / "values.yaml").read_text()))
    # group keys (image, externalServers, ...) may be documented through all of their children
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    groups = {key for key, value in values.items() if isinstance(value, dict)}
    leaves = [key for key in undocumented if key not in groups and key not in _all_group_names(values)]
    assert leaves == []


def _all_group_names(values: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for key, value in values.items():
        if isinstance(value, dict) and value:
            names.add(key)
            names |= _all_group_names(value)
    return names


# ----------------------------------------------------------------------------- docker-compose and collector


COMPOSE = ROOT / "docker-compose.yml"


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def test_compose_runs_every_service_with_health_checks() -> None:
    services = compose()["services"]
    assert {"nats", "temporal", "qdrant", "otel-collector", "jaeger", *SERVICES} <= set(services)
    for name in SERVICES:
        svc = services[name]
        assert svc["command"] == [name]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert svc["healthcheck"]["test"] == ["CMD", "evoskill", "health", name]
        env = svc["environment"]
        assert env["EVOSKILL_BIND_HOST"] == "0.0.0.0"
        for peer in SERVICES:
            assert env[f"EVOSKILL_{peer.upper()}_ENDPOINT__HOST"] == peer
            assert int(env[f"EVOSKILL_{peer.upper()}_ENDPOINT__PORT"]) == default_port(peer)
    for name, svc in services.items():
        for dependency, condition in svc.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency}'s health"
    assert "-js" in services["nats"]["command"]
    orchestrator_needs = set(services["orchestrator"]["depends_on"])
    assert {"temporal", "nats", "sandbox", "reward", "memory", "learner", "planner"} <= orchestrator_needs


def _check_collector(config: dict[str, Any]) -> None:
    pipelines = config["service"]["pipelines"]
    assert {"traces", "metrics"} <= set(pipelines)
    for pipeline in pipelines.values():
        assert set(pipeline["receivers"]) <= set(config["receivers"])
        assert set(pipeline["processors"]) <= set(config["processors"])
        assert set(pipeline["exporters"]) <= set(config["exporters"])
    assert "prometheus" in pipelines["metrics"]["exporters"]
    assert set(config["service"].get("extensions", [])) <= set(config.get("extensions", {}))


def test_collector_configs_are_consistent() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "otel-collector.yaml").read_text())
    _check_collector(config)
    assert "otlp/jaeger" in config["service"]["pipelines"]["traces"]["exporters"]
    assert config["exporters"]["otlp/jaeger"]["endpoint"] == "jaeger:4317"
    for profile in PROFILES:
        _check_collector(chart_collector_config(profile))
    production = chart_collector_config("production")
    assert production["exporters"]["otlp/traces"]["endpoint"].startswith("jaeger-collector.")


def chart_collector_config(profile: str) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(
        get(profile, "ConfigMap", f"{RELEASE}-otel-collector")["data"]["config.yaml"]
    )
    return config


def test_dockerfile_matches_the_chart() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^USER 10001:10001$", dockerfile, re.M)
    assert re.search(r'^ENTRYPOINT \[.*"evoskill", "serve"\]$', dockerfile, re.M)
    assert "openjdk-17-jre-headless" in dockerfile
    assert "-c requirements.lock" in dockerfile
    assert "EVOSKILL_STATE_DIR=/var/lib/evoskill" in dockerfile


# The Compose Specification's variable forms ("Interpolation"): $$, ${VAR}, ${VAR:-default}, ${VAR-default}, $VAR
_VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>\w+)(?:(?P<op>:?-)(?P<default>[^}]*))?\}|(?P<bare>\w+))")


def interpolated(text: str, environment: dict[str, str]) -> str:
    """The file as Compose reads it with `environment`: every variable replaced, `$$` left as one `$`."""

    def value(m: re.Match[str]) -> str:
        if m["escaped"]:
            return "$"
        name = m["braced"] or m["bare"]
        given = environment.get(name)
        if (m["op"] == ":-" and not given) or (m["op"] == "-" and given is None):
            return m["default"]
        assert given is not None, f"${{{name}}} has no default: `docker compose up` needs it set"
        return given

    return _VARIABLE.sub(value, text)


def validated_compose(text: str) -> compose_spec.PyCompose:
    """Parsed and checked against the Compose Specification by the compose_spec crate (strict: a misspelt key,
    a bad duration, port, restart policy or depends_on condition fails), after Compose's interpolation."""
    parsed = compose_spec.PyOptions(apply_merge=True).from_yaml(interpolated(text, {}))
    parsed.validate()  # networks, volumes, configs and secrets that services use are defined
    return parsed


def test_docker_compose_follows_the_compose_specification() -> None:
    parsed = validated_compose(COMPOSE.read_text()).to_dict()
    assert set(parsed["services"]) == set(compose()["services"])
    assert parsed["services"]["nats"]["healthcheck"]["start_period"] == "10s"  # the merge key's override wins
    named = set(parsed.get("volumes") or {})
    for name, svc in parsed["services"].items():
        for mount in svc.get("volumes") or []:
            source = mount.get("source", "") if isinstance(mount, dict) else str(mount).split(":")[0]
            if source and not source.startswith((".", "/", "~")):  # a named volume, not a bind mount
                assert source in named, f"{name} mounts undefined volume {source!r}"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (("    restart: unless-stopped\n    ports:", "    restart: sometimes\n    ports:"), "restart"),
        (("  interval: 15s", "  interval: 15 seconds"), "duration"),
        (("    command: [\"sandbox\"]", "    comand: [\"sandbox\"]"), "misspelt key"),
        (("        condition: service_healthy", "        condition: service_ready"), "depends_on condition"),
    ],
)
def test_the_compose_check_catches_mistakes(change: tuple[str, str], reason: str) -> None:
    text = COMPOSE.read_text()
    assert change[0] in text, reason
    with pytest.raises(ValueError):  # the crate's one error type
        validated_compose(text.replace(change[0], change[1], 1))


def test_compose_interpolation_follows_the_specification() -> None:
    assert interpolated("${A:-x} ${A-y} $$A ${B:-d} ${B-e} $A", {"A": "", "B": "b"}) == "x  $A b b "
    assert interpolated("${IMAGE:-nats:2.11-alpine}", {}) == "nats:2.11-alpine"


def _compose_plugin() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30)
    return docker if probe.returncode == 0 else None


def test_docker_compose_config_is_valid() -> None:
    """Docker's own check, beside the specification's above, where a Compose plugin exists."""
    docker = _compose_plugin()
    if docker is None:
        pytest.skip("no docker client with the compose plugin here (`docker compose version` fails); "
                    "test_docker_compose_follows_the_compose_specification checks the file without it")
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
