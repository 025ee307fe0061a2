"""deploy/kubernetes/: every overlay renders with `kubectl kustomize`, every object validates
strictly against the Kubernetes API schemas, and the manifests agree with the platform's config
(ports, probes, config keys, the store's members, the exported metric the autoscaler scales on).

What this proves is that the manifests are well-formed and consistent; none of it ran on a cluster.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from config.loader import parse_config
from config.settings import PlatformConfig
from datastore.urls import parse_store_url
from frontend.metrics import FrontendMetrics
from serving.store_ha.patroni_config import SCOPE

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (KUBE / "overlays").iterdir() if p.is_dir())
KUBERNETES_VERSION = "1.32.0"  # the API the schemas are checked against (kubectl 1.32 here)


@functools.cache
def _rendered(overlay: str) -> str:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is missing: `make setup-test` installs it (kube-deps)"
    return subprocess.run(
        [kubectl, "kustomize", str(KUBE / "overlays" / overlay)], capture_output=True, text=True, check=True
    ).stdout


def render(overlay: str) -> list[dict[str, Any]]:
    """The overlay's objects (rendered once per test session)."""
    return [doc for doc in yaml.safe_load_all(_rendered(overlay)) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}"
    return matches[0]


def config(name: str) -> PlatformConfig:
    raw = (KUBE / "base" / name).read_text()
    return parse_config(tomllib.loads(raw), name)  # unknown keys or bad values raise


def port(address: str) -> int:
    return int(address.rpartition(":")[2])


def container(workload: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_there_is_a_cpu_and_a_tensorrt_llm_overlay() -> None:
    assert OVERLAYS == ["cpu", "gpu-trtllm"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_strictly(overlay: str) -> None:
    objects = render(overlay)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "StatefulSet", "PodDisruptionBudget", "HorizontalPodAutoscaler", "Service"} <= kinds
    for o in objects:
        kubernetes_validate.validate(o, KUBERNETES_VERSION, strict=True)  # raises on any error


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_frontend_serves_and_is_probed_on_its_configured_ports(overlay: str) -> None:
    objects = render(overlay)
    cfg = config("frontend.toml")
    c = container(find(objects, "Deployment", "frontend"))
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {
        "grpc": port(cfg.frontend.listen),
        "http": port(cfg.http.listen),
        "metrics": port(cfg.frontend.metrics_listen),
        "relay": port(cfg.fleet.relay_listen),
    }
    # readiness is the platform's own grpc.health.v1 (NOT_SERVING while the store is away)
    assert c["readinessProbe"]["grpc"]["port"] == ports["grpc"]
    assert c["startupProbe"]["grpc"]["port"] == ports["grpc"]
    assert c["livenessProbe"]["tcpSocket"]["port"] == ports["grpc"]
    service = find(objects, "Service", "frontend")
    assert {p["port"] for p in service["spec"]["ports"]} == {ports["grpc"], ports["http"], ports["metrics"]}
    grace = find(objects, "Deployment", "frontend")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    assert grace > cfg.fleet.drain_timeout_s


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_autoscaler_scales_on_a_metric_the_platform_exports(overlay: str) -> None:
    objects = render(overlay)
    hpa = find(objects, "HorizontalPodAutoscaler", "frontend")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "frontend"
    names = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]}
    exported = {metric.name for family in FrontendMetrics().registry.collect() for metric in [family]}
    assert names <= exported, names - exported
    pdb = find(objects, "PodDisruptionBudget", "frontend")
    assert pdb["spec"]["selector"] == find(objects, "Deployment", "frontend")["spec"]["selector"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_workers_run_triton_on_their_configured_ports_with_the_model_volume(overlay: str) -> None:
    objects = render(overlay)
    cfg = config("worker.toml")
    worker = find(objects, "StatefulSet", "worker")
    c = container(worker)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    t = cfg.triton
    assert ports == {"triton-grpc": t.grpc_port, "triton-http": t.http_port, "triton-metrics": t.metrics_port}
    assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": t.http_port}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["models"] == "/app/var/models" and mounts["triton"] == t.work_dir
    assert [v["metadata"]["name"] for v in worker["spec"]["volumeClaimTemplates"]] == ["models"]
    gpus = c["resources"].get("limits", {}).get("nvidia.com/gpu")
    assert (gpus == "1") == (overlay == "gpu-trtllm")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_store_url_names_every_member_of_the_patroni_cluster(overlay: str) -> None:
    objects = render(overlay)
    store = find(objects, "StatefulSet", "store")
    replicas, service = store["spec"]["replicas"], store["spec"]["serviceName"]
    members = tuple((f"store-{i}.{service}", "5432") for i in range(replicas))
    for name in ("frontend.toml", "worker.toml"):
        url = parse_store_url(config(name).store.url)
        assert url.hosts == members and url.url.query["target_session_attrs"] == "read-write"
    env = {e["name"]: e.get("value") for e in container(store)["env"]}
    patroni = yaml.safe_load(env["SPILO_CONFIGURATION"])
    assert patroni["bootstrap"]["dcs"]["synchronous_mode"] is True
    assert env["SCOPE"] == SCOPE and ":" in container(store)["image"]  # pinned by tag
    secrets = {o["metadata"]["name"] for o in objects if o["kind"] == "Secret"}
    volumes = find(objects, "Deployment", "frontend")["spec"]["template"]["spec"]["volumes"]
    assert {v["secret"]["secretName"] for v in volumes if "secret" in v} <= secrets  # generated names
