"""deploy/monitoring/ and the worker autoscalers (deploy/kubernetes/autoscaling/): the alert rules
pass `promtool check rules` and their own `promtool test rules`; the dashboard is well-formed, each
of its expressions parses (promtool checks them as recording rules); and every metric a rule, a
panel or an autoscaler reads is one the platform exports (a frontend's own, or a worker's relayed
llm_worker_*). The KEDA ScaledObject validates against the schema of the fields it uses, the HPA
alternative against the Kubernetes API.

What this proves is that the files are well-formed and name real metrics; no Prometheus, Grafana
or KEDA ran them.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.worker_pool import WorkerPool
from frontend.metrics import FrontendMetrics
from frontend.serving_signals import ServingSignals
from tests.deploy.test_kubernetes import KUBE, KUBERNETES_VERSION, find
from tests.worker.fakes import MetricsApi
from worker.worker_metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
AUTOSCALING = KUBE / "autoscaling"
METRIC = re.compile(r"\bllm_[a-z_]+\b")


def promtool(*args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool is not None, "promtool is missing: `make setup-test` installs it (monitoring-deps)"
    return subprocess.run([tool, *args], capture_output=True, text=True, cwd=cwd)


@functools.cache
def exported() -> frozenset[str]:
    """Every sample name a frontend's /metrics can carry."""
    metrics = FrontendMetrics()
    metrics.watch_signals(ServingSignals(Dispatcher(WorkerPool()), WorkerPool(), lambda: True, lambda: 0))
    metrics.watch_retention(lambda: (0, 0, 0))
    metrics.tokens_out.labels("t", "m@1").inc()  # the decode share has a series once tokens flowed
    names = {s.name for family in metrics.registry.collect() for s in family.samples}
    api = MetricsApi()
    families: list[Any] = []
    original = api.family

    def record(name: str, description: str, counter: bool) -> Any:
        families.append(original(name, description, counter))
        return families[-1]

    api.family = record  # type: ignore[method-assign]
    WorkerMetrics("m", api)
    names |= {f.name for f in families}  # relayed as they are named on the worker
    # families with no sample until first used: a labelled counter or histogram exports its series
    for family in metrics.registry.collect():
        if family.type == "gauge":
            names.add(family.name)
        elif family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
    return frozenset(names)


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((MONITORING / "alerts.yaml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    board = json.loads((MONITORING / "dashboard.json").read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def autoscaler_queries() -> list[str]:
    scaled = yaml.safe_load((AUTOSCALING / "keda" / "worker-scaledobject.yaml").read_text())
    return [t["metadata"]["query"] for t in scaled["spec"]["triggers"]]


def test_the_alert_rules_check_and_pass_their_own_tests() -> None:
    checked = promtool("check", "rules", "alerts.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "alerts.test.yaml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    names = {r["alert"] for r in alert_rules()}
    wanted = {"LLMWorkerDown", "LLMHealthFlapping", "LLMQueueDeadlineRefusals", "LLMStoreUnavailable"}
    assert wanted | {"LLMUsageBacklog"} <= names
    tests = yaml.safe_load((MONITORING / "alerts.test.yaml").read_text())["tests"]
    fired = {c["alertname"] for t in tests for c in t["alert_rule_test"] if c["exp_alerts"]}
    assert fired == names  # every alert is shown to fire at least once


def test_the_dashboard_is_well_formed_and_every_expression_parses(tmp_path: Path) -> None:
    board = json.loads((MONITORING / "dashboard.json").read_text())
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"][
            "w"
        ] <= 24
        if panel["type"] != "row":
            assert panel["targets"] and all(t["expr"] and t["refId"] for t in panel["targets"])
    rows = {p["title"] for p in board["panels"] if p["type"] == "row"}
    assert {
        "Queue",
        "Prefill",
        "Decode and streaming",
        "Errors and cancellations",
        "KV cache and workers",
    } <= rows
    exprs = dashboard_exprs() + autoscaler_queries()
    rules = {
        "groups": [
            {"name": "parse", "rules": [{"record": f"parse:expr{i}", "expr": e} for i, e in enumerate(exprs)]}
        ]
    }
    path = tmp_path / "exprs.yaml"
    path.write_text(yaml.safe_dump(rules))
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_metric_read_is_one_the_platform_exports() -> None:
    texts = [r["expr"] for r in alert_rules()] + dashboard_exprs() + autoscaler_queries()
    read = {name for text in texts for name in METRIC.findall(text)}
    assert read and read <= exported(), sorted(read - exported())
    assert {"llm_queue_depth", "llm_predicted_queue_wait_seconds", "llm_kv_utilization"} <= read


def test_the_worker_autoscalers_validate() -> None:
    schema = json.loads((AUTOSCALING / "keda-scaledobject.schema.json").read_text())
    for variant, kind in (("keda", "ScaledObject"), ("hpa", "HorizontalPodAutoscaler")):
        rendered = subprocess.run(
            ["kubectl", "kustomize", str(AUTOSCALING / variant)], capture_output=True, text=True, check=True
        ).stdout
        objects = [doc for doc in yaml.safe_load_all(rendered) if doc]
        scaler = find(objects, kind, "worker")
        target = scaler["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("StatefulSet", "worker")
        find(objects, "StatefulSet", "worker")  # what it scales is in the same render
        for o in objects:
            if o["kind"] == "ScaledObject":
                jsonschema.validate(o, schema)
            else:
                kubernetes_validate.validate(o, KUBERNETES_VERSION, strict=True)
