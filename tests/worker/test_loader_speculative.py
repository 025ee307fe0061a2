"""The `[[models]]` speculative knobs reach the engine a worker builds (worker/loader.py): the
deployment's method and k become the engine's, and "draft" loads the draft model's artifact."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

from artifacts.manifest import Manifest, read_manifest
from engine.engine import Engine, EngineRequest
from prebuild.artifact import ensure_artifact
from prebuild.kernels import ensure_kernels
from tests.worker.fakes import Log, MetricsApi
from worker import loader
from worker.deployment import ModelDeployment


def test_a_draft_deployment_builds_a_speculating_engine(artifact_dir: Path) -> None:
    int4 = ensure_artifact(quantization="int4")
    manifest = read_manifest(artifact_dir)
    d = ModelDeployment(
        "m", artifact_dir, manifest.version, kv_cache_blocks=64, max_num_batched_tokens=64,
        kernels_library=str(ensure_kernels()), speculative_method="draft", speculative_tokens=3,
        draft_dir=str(int4),
    )  # fmt: skip

    def checked() -> Future[Manifest]:
        done: Future[Manifest] = Future()
        done.set_result(manifest)
        return done

    adapter, torch_thread, loaded, _ = loader._load(d, manifest, MetricsApi(), Log(), checked)
    try:
        engine = adapter.engine
        assert isinstance(engine, Engine)
        assert "speculative draft" in loaded
        spec = engine.speculator
        assert spec is not None and spec.config.num_tokens == 3 and spec.draft is not None
        assert spec.draft.model.config.num_layers == engine.model.config.num_layers

        def generate() -> int:
            engine.add_request(EngineRequest("r", (1, 2, 3, 4, 5, 6, 7, 8), 12))
            while engine.has_unfinished():
                engine.step()
            return spec.stats.drafted

        assert torch_thread.call(generate) > 0
    finally:
        torch_thread.run(lambda: None)
