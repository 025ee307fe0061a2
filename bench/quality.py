"""The quality gate of quantized model versions, as a report: greedy agreement with the fp32
reference on fixed prompts, and perplexity on a fixed held-out text (bench/data/heldout.txt,
written for this project), side by side in one run. tests/engine/test_quantized.py asserts the
same figures against the thresholds below.

Run: `python -m bench quality [--out var/bench]`. Writes quality.json and quality.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer

from engine.config import DTYPES
from engine.evaluate import agreement, greedy_continuations, perplexity
from engine.model import LlamaForCausalLM

HELDOUT = Path(__file__).resolve().parent / "data" / "heldout.txt"
AGREEMENT_TOKENS = 32
# scheme -> (least fraction of prompts whose first 32 greedy tokens equal fp32's,
#            most relative perplexity increase over fp32)
THRESHOLDS = {"int8": (0.90, 0.02), "int4": (0.70, 0.08)}

PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "The three primary colours are",
    "Water boils at",
    "import numpy as np\n",
    "A good breakfast includes",
    "The theory of relativity says that",
    "To make a cup of tea, first",
    "The largest planet in the solar system is",
    "Here is a short poem about autumn:\n",
    "SELECT name, age FROM users WHERE",
    "The main causes of the French Revolution were",
    "Photosynthesis is the process by which",
    "My favourite book is",
    "The quick brown fox",
    "In machine learning, overfitting means",
    "class Stack:\n    def __init__(self):",
    "The recipe calls for two cups of flour,",
    "Dear customer, thank you for your order.",
    "The history of the Roman Empire begins",
    "A healthy lifestyle includes regular exercise and",
    "The best way to learn a new language is",
    "Question: What is 12 times 7?\nAnswer:",
)


def heldout_ids(tokenizer: Tokenizer) -> list[int]:
    return tokenizer.encode(HELDOUT.read_text()).ids


def prompt_ids(tokenizer: Tokenizer) -> list[list[int]]:
    return [tokenizer.encode(p).ids for p in PROMPTS]


def measure(
    model: LlamaForCausalLM,
    dtype: torch.dtype,
    tokenizer: Tokenizer,
    reference: list[list[int]] | None,
    kv_dtype: torch.dtype | None = None,
) -> dict[str, float | list[list[int]]]:
    """Greedy continuations, their agreement with `reference` (when given) and perplexity."""
    tokens = greedy_continuations(model, prompt_ids(tokenizer), AGREEMENT_TOKENS, dtype, kv_dtype)
    figures: dict[str, float | list[list[int]]] = {
        "perplexity": perplexity(model, heldout_ids(tokenizer)),
        "tokens": tokens,
    }
    if reference is not None:
        figures["agreement"] = agreement(reference, tokens)
    return figures


def report(rows: dict[str, dict[str, float]]) -> str:
    lines = [
        "| version | greedy agreement (first 32 tokens) | perplexity | vs fp32 | target |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    base = rows["none"]["perplexity"]
    for scheme, f in rows.items():
        target = "reference" if scheme == "none" else "≥ {:.0%} / ≤ +{:.0%}".format(*THRESHOLDS[scheme])
        lines.append(
            f"| {scheme} | {f['agreement']:.0%} | {f['perplexity']:.3f} | "
            f"{f['perplexity'] / base - 1:+.2%} | {target} |"
        )
    return "\n".join(lines)


def main() -> int:
    from engine.weights import load_model
    from prebuild.artifact import ensure_artifact

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("var/bench"))
    parser.add_argument("--no-kernels", action="store_true", help="eager PyTorch, as without engine/csrc")
    parser.add_argument("--kv-dtype", choices=sorted(DTYPES), help="the quantized versions' KV cache dtype")
    args = parser.parse_args()
    if not args.no_kernels:
        from prebuild.kernels import load_kernels

        print(f"kernels: {load_kernels()}")
    base = ensure_artifact()
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    ref = measure(load_model(base, torch.float32), torch.float32, tokenizer, None)
    ref_tokens = ref["tokens"]
    assert isinstance(ref_tokens, list)
    rows: dict[str, dict[str, float]] = {}
    for scheme in ("none", "int8", "int4"):
        path = ensure_artifact(quantization=scheme)
        kv = DTYPES[args.kv_dtype] if args.kv_dtype and scheme != "none" else None
        f = measure(load_model(path, torch.float32), torch.float32, tokenizer, ref_tokens, kv)
        rows[scheme] = {"agreement": float(f["agreement"]), "perplexity": float(f["perplexity"])}  # type: ignore[arg-type]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.json").write_text(json.dumps(rows, indent=2))
    table = report(rows)
    (args.out / "quality.md").write_text(table + "\n")
    print(table)
    return 0
