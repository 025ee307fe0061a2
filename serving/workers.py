"""The Triton workers of one machine: each model's verified artifact, what a worker's engine is
started with, and the `tritonserver` processes this platform runs (docs/architecture.md, "Threads on
a worker")."""

from __future__ import annotations

import dataclasses
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from config.loader import ConfigError
from config.settings import DEFAULT_MODEL_SOURCE, ModelSettings, PlatformConfig, WorkerSettings
from contracts.capacity import DEFAULT_KV_CACHE_BLOCKS
from frontend.catalog.registry import ServedVersion
from serving.triton import TritonServer
from worker.deployment import ModelDeployment

ROOT = Path(__file__).resolve().parent.parent


def artifact_for(model: ModelSettings) -> Path:
    """The verified artifact folder of a `[[models]]` entry, in its `quantization` scheme (built from
    the GGUF, and quantized from the plain artifact, if needed)."""
    from prebuild.artifact import DEFAULT_NAME, ensure_artifact, ensure_quantized

    if model.source == DEFAULT_MODEL_SOURCE:
        return ensure_artifact(DEFAULT_NAME, quantization=model.quantization)
    path = Path(model.source)
    if not path.is_absolute():
        path = ROOT / path
    if not (path / "manifest.json").is_file():
        raise ConfigError(f"model {model.alias}: source {model.source!r} is not an artifact folder")
    try:
        return ensure_quantized(path, model.quantization)
    except ValueError as e:
        raise ConfigError(f"model {model.alias}: {e}") from e


@dataclass(slots=True)
class LocalWorker:
    """One `tritonserver` process this platform started, and the versions it loads."""

    worker_id: str
    server: TritonServer
    versions: list[tuple[ModelSettings, ServedVersion]]
    address: str = ""  # host:port frontends dial ("": the server's own grpc_url)

    @property
    def advertised(self) -> str:
        return self.address or self.server.grpc_url

    def load(self) -> None:
        """Loads every version at once (blocking): Triton loads models requested together side by
        side, so their stubs start, import torch and warm up overlapped. The first failure raises,
        once every load has ended."""
        names = [version.triton_model_name for _, version in self.versions]
        with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="load") as loads:
            for done in [loads.submit(self.server.load_model, name) for name in names]:
                done.result()


def worker_id(settings: WorkerSettings, grpc_port: int, index: int, hostname: str | None = None) -> str:
    """Worker i of this host: "<name>-<i>" with a [worker] name, else "<hostname>-<its Triton gRPC
    port>": unique per host (one server holds a port at a time) and so across process trees, the
    same across restarts on configured ports (a drain flag holds), new per launch on free ports."""
    if settings.name:
        return f"{settings.name}-{index}"
    return f"{(hostname or socket.gethostname())[:64]}-{grpc_port}"


def worker_port(base: int, index: int) -> int:
    """Worker i's port: the configured one plus 100 * i (0 stays 0: a free port)."""
    return base + 100 * index if base else 0


def engine_threads(cfg: PlatformConfig, cpus: int | None = None, env: dict[str, str] | None = None) -> int:
    """Torch threads for each engine this platform starts: OMP_NUM_THREADS when the operator set it,
    else the CPUs this process may use, less one kept for the frontend and `tritonserver`, shared
    out among the configured models' engines (one per worker each), at least one. An OpenMP team
    waits for every one of its threads at each of a step's hundreds of parallel regions: a thread
    preempted by the frontend's per-token work stalls the whole step (docs/architecture.md,
    "Threads on a worker")."""
    env = dict(os.environ) if env is None else env
    if env.get("OMP_NUM_THREADS", "").strip().isdigit() and int(env["OMP_NUM_THREADS"]) > 0:
        return int(env["OMP_NUM_THREADS"])
    cpus = len(os.sched_getaffinity(0)) if cpus is None else cpus
    engines = sum(m.workers for m in cfg.models)
    return max(1, (cpus - 1) // max(1, engines))


def kernels_library(model: ModelSettings) -> str:
    """The engine's kernels for this machine (compiled once, at set-up or here), or "" when the
    model runs without them; ConfigError when they cannot be built."""
    if not model.kernels:
        return ""
    from prebuild.kernels import KernelBuildError, ensure_kernels

    try:
        return str(ensure_kernels())
    except (KernelBuildError, OSError) as e:
        raise ConfigError(f"model {model.alias}: {e} (set kernels = false to run without them)") from e


# measured step costs kept between loads (worker/step_cost_cache.py); delete to measure again
STEP_COST_DIR = Path(__file__).resolve().parent.parent / "var" / "step-cost"
# artifact files already verified, by file identity (artifacts/file_digests.py); delete to hash them again
VERIFIED_DIR = Path(__file__).resolve().parent.parent / "var" / "verified"


def draft_for(m: ModelSettings, models: tuple[ModelSettings, ...]) -> str:
    """The artifact folder of the entry's speculative draft model ("int4": its own source quantized,
    else another entry's alias), or "" when it drafts with none."""
    if m.speculative_method != "draft":
        return ""
    if m.speculative_draft == "int4":
        return str(artifact_for(dataclasses.replace(m, quantization="int4")))
    other = next((o for o in models if o.alias == m.speculative_draft), None)
    if other is None:
        raise ConfigError(f"model {m.alias}: speculative_draft {m.speculative_draft!r} is no model's alias")
    return str(artifact_for(other))


# each engine's prefix-cache summary, under its tritonserver's pid (contracts/prefix_summary.py)
PREFIX_SUMMARY_DIR = Path(__file__).resolve().parent.parent / "var" / "prefix-summary"


def deployment(
    m: ModelSettings,
    v: ServedVersion,
    intra_op_threads: int = 0,
    trace_url: str = "",
    summary_blocks: int = 0,
    models: tuple[ModelSettings, ...] = (),
) -> ModelDeployment:
    """summary_blocks: the most prefix-cache fingerprints its engines publish (0: none). `models`:
    every configured entry (a draft model may be another entry's version)."""
    return ModelDeployment(
        triton_model_name=v.triton_model_name,
        artifact_dir=v.artifact_dir,
        version=v.manifest.version,
        dtype=m.dtype,  # "auto" is resolved by the worker, on its own CPU
        kv_cache_dtype=m.kv_cache_dtype,
        block_size=m.block_size,
        kv_cache_blocks=kv_blocks(m),
        max_num_seqs=m.max_num_seqs,
        max_num_batched_tokens=m.max_num_batched_tokens,
        scheduler_policy=m.scheduler_policy,
        fair_share=m.fair_share,
        intra_op_threads=intra_op_threads,
        kernels_library=kernels_library(m),
        step_cost_cache=str(STEP_COST_DIR),
        verified_dir=str(VERIFIED_DIR),
        trace_url=trace_url,
        speculative_method=m.speculative_method,
        speculative_tokens=m.speculative_tokens,
        draft_dir=draft_for(m, models),
        prefix_summary_dir=str(PREFIX_SUMMARY_DIR) if summary_blocks else "",
        prefix_summary_blocks=summary_blocks,
    )


def kv_blocks(model: ModelSettings) -> int:
    return model.kv_cache_blocks or DEFAULT_KV_CACHE_BLOCKS
