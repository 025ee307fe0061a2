"""The GPU worker recipe: build a TensorRT-LLM engine from our artifact and materialize its Triton
model from `triton_models/tensorrt_llm/`.

It needs an NVIDIA GPU and the `tensorrt_llm` package (NVIDIA's Triton TensorRT-LLM container has
both), so it never runs on our CPU machines. By default it prints the steps; `--run` executes them.

    1. convert   the artifact's Hugging Face Llama checkpoint -> a TensorRT-LLM checkpoint (bf16)
    2. build     trtllm-build with paged KV cache, paged context FMHA (chunked prefill), no padding
    3. grammar   the tokenizer's vocabulary for guided decoding (structured outputs, xgrammar: the
                 backend TensorRT-LLM's C++ runtime has; the CPU worker uses llguidance)
    4. repository config.pbtxt from the template, pointing at the engine

Run: `python -m prebuild.trtllm --artifact var/models/smollm2-135m/<version> --work-dir var/trtllm`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template

from artifacts.manifest import read_manifest

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "triton_models" / "tensorrt_llm" / "config.pbtxt.template"


@dataclass(slots=True, frozen=True)
class EngineBuild:
    artifact_dir: Path
    work_dir: Path
    dtype: str = "bfloat16"
    max_batch_size: int = 64  # the engine's max_num_seqs
    max_num_tokens: int = 2048  # tokens per step: the prefill chunk budget on a GPU
    max_seq_len: int = 8192  # prompt + output
    scheduler_policy: str = "guaranteed_no_evict"

    @property
    def checkpoint_dir(self) -> Path:
        return self.work_dir / "checkpoint"

    @property
    def engine_dir(self) -> Path:
        return self.work_dir / "engine"

    @property
    def tokenizer_info_path(self) -> Path:
        return self.work_dir / "xgrammar" / "xgrammar_tokenizer_info.json"

    def commands(self, convert_script: str, grammar_script: str = "") -> list[list[str]]:
        """The conversion, build and grammar commands (convert_script: TensorRT-LLM's llama
        converter; grammar_script: its generate_xgrammar_tokenizer_info.py, "" for none)."""
        return [
            [
                sys.executable, convert_script,
                "--model_dir", str(self.artifact_dir),
                "--output_dir", str(self.checkpoint_dir),
                "--dtype", self.dtype,
            ],
            [
                "trtllm-build",
                "--checkpoint_dir", str(self.checkpoint_dir),
                "--output_dir", str(self.engine_dir),
                "--gemm_plugin", "auto",
                "--gpt_attention_plugin", "auto",
                "--paged_kv_cache", "enable",
                "--use_paged_context_fmha", "enable",
                "--remove_input_padding", "enable",
                "--max_batch_size", str(self.max_batch_size),
                "--max_num_tokens", str(self.max_num_tokens),
                "--max_seq_len", str(self.max_seq_len),
            ],
            *([[
                sys.executable, grammar_script,
                "--model_dir", str(self.artifact_dir),
                "--output_dir", str(self.tokenizer_info_path.parent),
            ]] if grammar_script else []),
        ]  # fmt: skip


def render_config(build: EngineBuild, triton_model_name: str) -> str:
    """The TensorRT-LLM model's config.pbtxt for this engine."""
    return Template(TEMPLATE.read_text()).substitute(
        triton_model_name=triton_model_name,
        max_num_seqs=build.max_batch_size,
        engine_dir=str(build.engine_dir),
        scheduler_policy=build.scheduler_policy,
        max_tokens_in_paged_kv_cache=build.max_batch_size * build.max_seq_len,
        xgrammar_tokenizer_info_path=str(build.tokenizer_info_path),
    )


def materialize(build: EngineBuild, repo_dir: Path) -> Path:
    manifest = read_manifest(build.artifact_dir)
    name = f"{manifest.name}--{manifest.version}"
    model_dir = repo_dir / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(render_config(build, name))
    return model_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "var" / "trtllm")
    parser.add_argument("--convert-script", default="examples/llama/convert_checkpoint.py")
    parser.add_argument("--grammar-script", default="examples/generate_xgrammar_tokenizer_info.py")
    parser.add_argument("--run", action="store_true", help="execute the steps (needs a GPU and tensorrt_llm)")
    args = parser.parse_args()
    build = EngineBuild(args.artifact.resolve(), args.work_dir.resolve())
    for cmd in build.commands(args.convert_script, args.grammar_script):
        print(" ".join(cmd))
        if args.run:
            subprocess.run(cmd, check=True)
    print(f"model repository entry: {materialize(build, build.work_dir / 'models')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
