"""Starts the CPU worker for one deployment: verifies the artifact, then on the torch thread loads
the weights, sizes the step budget, builds the engine and runs the loop (torch_thread.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

from artifacts.manifest import ArtifactIntegrityError, Manifest, read_manifest, remember_checks_in, verify
from contracts.prefix_summary import summary_path
from engine import cost_model, kernels, step_budget
from engine.config import DTYPES, resolve_dtype
from engine.constraints import Grammars
from engine.engine import Engine, EngineConfig
from engine.model import LlamaForCausalLM
from engine.speculative.speculation import SpeculativeConfig
from engine.step_budget import StepCost
from engine.weights import load_model
from worker import step_cost_cache
from worker.adapter import WorkerAdapter
from worker.deployment import ModelDeployment
from worker.heap import release_freed_memory
from worker.prefix_summary import PrefixSummaryWriter
from worker.protocol import Log
from worker.request_spans import request_spans
from worker.torch_thread import TorchThread
from worker.worker_metrics import MetricsApi, WorkerMetrics


def start_worker(d: ModelDeployment, metrics_api: MetricsApi, log: Log) -> WorkerAdapter:
    """The running worker. Raises (and Triton then never marks the model ready) when the artifact
    fails its checksums or is another version than the deployment names.

    The worker checks every file itself, whatever the frontend checked: it is the process that
    reads the weights, and a worker host may hold its own copy of the artifact. The hashing (which
    releases the GIL) runs beside the weights' load, once the step-cost lock is held (so never
    beside another version's timed steps), and ends before this version's steps are timed;
    nothing is served, and the loop does not start, before it has passed. Files recorded as
    verified (d.verified_dir) and unchanged since are not hashed again."""
    if d.verified_dir:
        remember_checks_in(Path(d.verified_dir))
    manifest = read_manifest(d.artifact_dir)
    if manifest.version != d.version:
        raise ValueError(f"artifact version {manifest.version} != configured {d.version}")
    with ThreadPoolExecutor(1, thread_name_prefix="verify") as hashing:
        adapter, torch_thread, loaded, checked = _load(
            d, manifest, metrics_api, log, lambda: hashing.submit(verify, d.artifact_dir)
        )
        if checked.result() != manifest:  # raises ArtifactIntegrityError on a mismatch
            raise ArtifactIntegrityError(f"{d.artifact_dir}: the manifest changed while the model loaded")
    adapter.start(torch_thread)
    log.log_info(f"{loaded}, checksums verified")
    return adapter


def _load(
    d: ModelDeployment,
    manifest: Manifest,
    metrics_api: MetricsApi,
    log: Log,
    hash_artifact: Callable[[], Future[Manifest]],
) -> tuple[WorkerAdapter, TorchThread, str, Future[Manifest]]:
    """The adapter over a loaded model, not started, its torch thread, what to log of it, and the
    artifact's hashing (`hash_artifact` starts it, beside the weights' load)."""
    dtype_name = resolve_dtype(d.dtype)
    dtype = DTYPES[dtype_name]
    threads = d.intra_op_threads or len(os.sched_getaffinity(0))
    torch_thread = TorchThread(threads)
    isa = torch_thread.call(kernels.load, Path(d.kernels_library)) if d.kernels_library else "none"
    kernel_threads = d.kernel_threads or len(os.sched_getaffinity(0))
    if d.kernels_library:
        torch_thread.call(kernels.set_threads, kernel_threads)
    kv_dtype_name = dtype_name if d.kv_cache_dtype == "auto" else d.kv_cache_dtype
    # the scalar build is the kernels' correctness path for hosts without AVX2: eager PyTorch is faster
    use_kernels = isa not in ("none", "scalar")
    # a configured budget is fixed; 0: each step's is sized from the cost measured here, or cached
    key: str | None = None
    cached: step_cost_cache.Entry | None = None
    if not d.max_num_batched_tokens:
        key = step_cost_cache.cache_key(
            manifest.version_id, dtype_name, kv_dtype_name, d.kernels_library, threads, kernel_threads
        )
        cached = step_cost_cache.load(Path(d.step_cost_cache), key) if d.step_cost_cache else None
    measuring = key is not None and cached is None
    with step_cost_cache.loading(Path(d.step_cost_cache) if d.step_cost_cache else None, measuring) as hold:
        checked = hash_artifact()
        model = torch_thread.call(load_model, d.artifact_dir, dtype, None, use_kernels)
        draft = None  # speculative decoding's draft model (the same tokenizer), when it has one
        if d.speculative_method == "draft":
            draft = torch_thread.call(load_model, Path(d.draft_dir), dtype, None, use_kernels)
        cost = None
        if key is not None:
            wait([checked])  # the hashing would slow the timed steps (its verdict is start_worker's)
            cost = torch_thread.call(
                _step_cost, model, (dtype_name, kv_dtype_name), d.step_cost_cache, key, cached, hold, log
            )
    config = EngineConfig(
        num_blocks=d.kv_cache_blocks,
        block_size=d.block_size,
        max_num_seqs=d.max_num_seqs,
        max_num_batched_tokens=d.max_num_batched_tokens,
        step_cost=cost,
        policy=d.scheduler_policy,
        fair_share=d.fair_share,
        dtype=dtype,
        kv_dtype=DTYPES[kv_dtype_name],
        compatibility_key=f"{manifest.compatibility_key}:{dtype_name}",
        speculative=SpeculativeConfig(d.speculative_method, d.speculative_tokens),
    )

    # structured outputs: guides compiled for this model's tokenizer, kept across engine rebuilds
    grammars = Grammars(d.artifact_dir / "tokenizer.json", sorted(model.config.eos_token_ids))

    def new_engine() -> Engine:
        return Engine(model, config, grammars=grammars, draft_model=draft)

    engine = torch_thread.call(new_engine)
    release_freed_memory()  # what loading freed, back to the OS (heap.py)
    adapter = WorkerAdapter(
        engine,
        new_engine,
        frozenset(model.config.eos_token_ids),
        WorkerMetrics(d.triton_model_name, metrics_api),
        log,
        spans=request_spans(d.trace_url),
        summary=_summary_writer(d, config.compatibility_key, log),
    )
    loaded = (
        f"model {manifest.version_id} loaded ({dtype_name}, weights {manifest.quantization}, "
        f"{config.num_blocks} KV blocks of {config.block_size} ({kv_dtype_name}), {config.policy}, "
        f"{threads} intra-op threads, kernels {isa} on {kernel_threads} threads"
        f"{'' if model.fused else ', eager steps'}, speculative {d.speculative_method})"
    )
    return adapter, torch_thread, loaded, checked


def _summary_writer(d: ModelDeployment, compatibility_key: str, log: Log) -> PrefixSummaryWriter | None:
    """The prefix-cache summary's file, under the `tritonserver` that started this stub (its parent)."""
    if not d.prefix_summary_dir or d.prefix_summary_blocks < 1:
        return None
    path = summary_path(Path(d.prefix_summary_dir), os.getppid(), d.triton_model_name, os.getpid())
    return PrefixSummaryWriter(path, compatibility_key, d.block_size, d.prefix_summary_blocks, log)


def _step_cost(
    model: LlamaForCausalLM,
    dtypes: tuple[str, str],
    cache: str,
    key: str,
    cached: step_cost_cache.Entry | None,
    hold: step_cost_cache.Hold,
    log: Log,
) -> StepCost:
    """This machine's step cost: the `cached` one, unless its reference step now runs faster (it was
    measured on a busy host), else measured by a few timed steps (which also warm the kernels up)
    and cached (worker/step_cost_cache.py). dtypes: the compute and the KV cache's."""
    dtype, kv_dtype = DTYPES[dtypes[0]], DTYPES[dtypes[1]]
    hold.exclusive()  # already, when measuring: no step is timed beside another version's load
    if cache:  # read again under the lock: a load of the same version may have measured meanwhile
        cached = step_cost_cache.load(Path(cache), key)
    if cached is not None:
        cost_model.warm_up(model, dtype)  # the first touch, before the reference step is timed
    entry, origin = step_cost_cache.resolve(
        cached,
        lambda: cost_model.reference_step(model, dtype, kv_dtype),
        lambda: cost_model.measure(model, dtype, kv_dtype=kv_dtype),
    )
    if cache and entry is not cached:
        step_cost_cache.save(Path(cache), key, entry)
    cost = entry.cost
    alone = step_budget.prefill_budget(cost, 1, interactive=True)
    log.log_info(
        f"step cost ({origin}) {cost.fixed_s * 1e3:.1f} ms + {cost.per_decode_s * 1e3:.2f} ms a decode + "
        f"{cost.per_prefill_token_s * 1e3:.3f} ms a prompt token + {cost.per_attended_s * 1e9:.0f} ns a "
        "(token, key) pair of a chunk's attention: beside one interactive decode a step "
        f"prefills {alone} tokens (the {step_budget.ITL_OBJECTIVE_S * 1e3:.0f} ms objective)"
    )
    return cost
