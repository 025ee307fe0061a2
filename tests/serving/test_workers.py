"""How many torch threads each engine the platform starts gets (docs/architecture.md, "Threads on a
worker"), and that the worker's model repository carries the number."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from config.loader import parse_config
from config.settings import PlatformConfig, WorkerSettings
from serving.workers import engine_threads, worker_id
from worker.deployment import ModelDeployment, materialize_repository


def config(*workers: int) -> PlatformConfig:
    return parse_config({"models": [{"alias": f"m{i}", "workers": w} for i, w in enumerate(workers)]})


def test_one_engine_gets_every_cpu_but_the_one_kept_for_the_frontend_and_triton() -> None:
    assert engine_threads(config(1), cpus=2, env={}) == 1
    assert engine_threads(config(1), cpus=16, env={}) == 15
    assert engine_threads(config(1), cpus=1, env={}) == 1


def test_the_cpus_are_shared_out_among_the_engines_at_least_one_each() -> None:
    assert engine_threads(config(1, 1), cpus=2, env={}) == 1
    assert engine_threads(config(2, 1), cpus=8, env={}) == 2
    assert engine_threads(config(2, 1), cpus=10, env={}) == 3
    assert engine_threads(config(2, 2), cpus=2, env={}) == 1


def test_the_operators_omp_num_threads_wins() -> None:
    assert engine_threads(config(1), cpus=2, env={"OMP_NUM_THREADS": "1"}) == 1
    assert engine_threads(config(1, 1), cpus=2, env={"OMP_NUM_THREADS": "3"}) == 3
    assert engine_threads(config(1), cpus=4, env={"OMP_NUM_THREADS": "two"}) == 3


def test_the_repository_carries_the_threads(tmp_path: Path) -> None:
    materialize_repository([ModelDeployment("m", Path("/artifact"), "v1", intra_op_threads=3)], tmp_path)
    cfg = text_format.Parse((tmp_path / "m" / "config.pbtxt").read_text(), mc.ModelConfig())
    assert cfg.parameters["intra_op_threads"].string_value == "3"


def test_worker_ids_are_unique_per_host_and_stable_across_restarts_on_fixed_ports() -> None:
    """Two process trees on one host cannot hold one port, so "<host>-<port>" never collides; a
    configured name gives "<name>-<i>" (the e2e tests' "local-0", a fleet's "gpu-7-0")."""
    unnamed = WorkerSettings()
    assert worker_id(unnamed, 8001, 0, hostname="box") == "box-8001"
    assert worker_id(unnamed, 8101, 1, hostname="box") == "box-8101"
    assert worker_id(WorkerSettings(name="gpu-7"), 8001, 0, hostname="box") == "gpu-7-0"
    assert len(worker_id(unnamed, 8001, 0, hostname="h" * 200)) == 64 + len("-8001")
