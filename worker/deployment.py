"""One model version as a Triton model, and the model repository that holds it.

`materialize_repository()` writes `<repo>/<triton model name>/config.pbtxt` from
triton_models/llm_cpu/config.pbtxt.template, whose parameters carry every ModelDeployment field,
and copies the model's one file, the shim `1/model.py`. Inside the stub, the worker reads the same
fields back with `ModelDeployment.from_model_config()`: the two ends of config.pbtxt in one place.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from contracts.capacity import DEFAULT_BLOCK_SIZE, DEFAULT_KV_CACHE_BLOCKS, DEFAULT_MAX_NUM_SEQS
from contracts.prefix_summary import DEFAULT_SUMMARY_BLOCKS

TEMPLATE = Path(__file__).resolve().parent.parent / "triton_models" / "llm_cpu"


# parameters whose absence is harmless (no spans, every file hashed, the step cost measured again)
OPTIONAL = frozenset(
    {
        "trace_url",
        "verified_dir",
        "step_cost_cache",
        "speculative_method",
        "speculative_tokens",
        "draft_dir",
        "prefix_summary_dir",
        "prefix_summary_blocks",
    }
)


@dataclass(slots=True, frozen=True)
class ModelDeployment:
    """One model version as a Triton model; values come from the `[[models]]` config."""

    triton_model_name: str
    artifact_dir: Path
    version: str  # the artifact's version: the worker refuses an artifact of another
    instances: int = 1  # engine instances (each its own stub process and KV cache)
    dtype: str = "float32"  # or "bfloat16", or "auto": resolved by the worker on its own CPU
    kv_cache_dtype: str = "auto"  # "float32" or "bfloat16"; "auto": the resolved compute dtype
    block_size: int = DEFAULT_BLOCK_SIZE
    kv_cache_blocks: int = DEFAULT_KV_CACHE_BLOCKS
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = 0  # the prefill chunk budget; 0: from the measured step cost
    scheduler_policy: str = "guaranteed_no_evict"
    fair_share: bool = True
    intra_op_threads: int = 0  # torch threads of each engine; 0: every CPU the worker may use
    kernels_library: str = ""  # the engine's compiled kernels (prebuild/kernels.py); "": eager PyTorch
    kernel_threads: int = 0  # threads of the kernels' work-claiming pool; 0: every CPU the worker may use
    step_cost_cache: str = ""  # folder of measured step costs (worker/step_cost_cache.py); "": none
    verified_dir: str = (
        ""  # folder of files' recorded digests (artifacts/file_digests.py); "": hash every file
    )
    # folder of the prefix cache's summaries (contracts/prefix_summary.py); "": none written
    prefix_summary_dir: str = ""
    prefix_summary_blocks: int = DEFAULT_SUMMARY_BLOCKS  # fingerprints in one engine's summary at most
    trace_url: str = ""  # OTLP/HTTP traces URL for each request's engine span (request_spans.py); "": none
    speculative_method: str = "none"  # "none", "draft" or "ngram" (engine/speculative/speculation.py)
    speculative_tokens: int = 0  # drafts a step; 0: chosen each step from the measured cost
    draft_dir: str = ""  # "draft": the draft model's artifact folder (the same tokenizer)

    def parameters(self) -> dict[str, str]:
        """The config.pbtxt parameters: every field but the name and the instance count."""
        return {
            f.name: _encode(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("triton_model_name", "instances")
        }

    @classmethod
    def from_model_config(cls, config: dict[str, Any]) -> ModelDeployment:
        """The deployment a model config (as Triton hands it to the Python backend, JSON-decoded)
        was written from; of OPTIONAL, a parameter it lacks takes the field's default (a config
        written before the field existed). KeyError when another is missing, ValueError when one is
        malformed."""
        # an empty string_value is left out of the JSON form (the default of a proto3 string)
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        groups = config.get("instance_group") or [{}]
        values: dict[str, Any] = {"triton_model_name": config["name"]}
        values["instances"] = int(groups[0].get("count", 1))
        for f in dataclasses.fields(cls):
            if f.name not in values and (f.name in params or f.name not in OPTIONAL):
                values[f.name] = _decode(params[f.name], f.type)
        return cls(**values)


def _encode(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _decode(text: str, kind: object) -> object:
    """A parameter's value as the field's type (annotations are strings here)."""
    if kind == "bool":
        if text not in ("true", "false"):
            raise ValueError(f"not a boolean: {text!r}")
        return text == "true"
    if kind == "int":
        return int(text)
    if kind == "Path":
        return Path(text)
    return text


def materialize_repository(deployments: list[ModelDeployment], repo_dir: Path) -> Path:
    """Writes `repo_dir/<triton_model_name>/{config.pbtxt,1/model.py}` for each deployment."""
    template = Template((TEMPLATE / "config.pbtxt.template").read_text())
    repo_dir.mkdir(parents=True, exist_ok=True)
    for d in deployments:
        model_dir = repo_dir / d.triton_model_name
        (model_dir / "1").mkdir(parents=True, exist_ok=True)
        config = template.substitute(
            triton_model_name=d.triton_model_name, instance_count=d.instances, **d.parameters()
        )
        (model_dir / "config.pbtxt").write_text(config)
        shutil.copy2(TEMPLATE / "1" / "model.py", model_dir / "1" / "model.py")
    return repo_dir
