"""One model version as a Triton model, and the model repository that holds it: each
deployment's `config.pbtxt` and model files, materialized from `triton_models/`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "triton_models"


@dataclass(slots=True, frozen=True)
class ModelDeployment:
    """One model version as a Triton model; values come from the `[[models]]` config."""

    triton_model_name: str
    artifact_dir: Path
    version: str
    instances: int = 1  # engine instances (each its own stub process and KV cache)
    dtype: str = "float32"
    block_size: int = 16
    kv_cache_blocks: int = 0  # 0: sized by the engine
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 0  # the prefill chunk budget; 0: from the measured step cost
    scheduler_policy: str = "guaranteed_no_evict"
    fair_share: bool = True
    intra_op_threads: int = 0  # torch threads of each engine; 0: every CPU the worker may use


def materialize_repository(deployments: list[ModelDeployment], repo_dir: Path) -> Path:
    """Writes `repo_dir/<triton_model_name>/{config.pbtxt,1/*.py}` from the CPU template."""
    template = Template((TEMPLATES / "llm_cpu" / "config.pbtxt.template").read_text())
    repo_dir.mkdir(parents=True, exist_ok=True)
    for d in deployments:
        model_dir = repo_dir / d.triton_model_name
        (model_dir / "1").mkdir(parents=True, exist_ok=True)
        config = template.substitute(
            triton_model_name=d.triton_model_name,
            repo_root=str(ROOT),
            artifact_dir=str(d.artifact_dir),
            model_version=d.version,
            instance_count=d.instances,
            dtype=d.dtype,
            block_size=d.block_size,
            kv_cache_blocks=d.kv_cache_blocks,
            max_num_seqs=d.max_num_seqs,
            max_num_batched_tokens=d.max_num_batched_tokens,
            scheduler_policy=d.scheduler_policy,
            fair_share="true" if d.fair_share else "false",
            intra_op_threads=d.intra_op_threads,
        )
        (model_dir / "config.pbtxt").write_text(config)
        for source in (TEMPLATES / "llm_cpu" / "1").glob("*.py"):  # model.py and the modules it imports
            shutil.copy2(source, model_dir / "1" / source.name)
    return repo_dir
