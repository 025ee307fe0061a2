"""`llmctl build` (or `python -m prebuild.build`): a Hugging Face folder or a GGUF becomes the
platform's immutable artifact (artifacts/manifest.py) on the operator's machine, ready to push.

    HF folder   config.json (architectures: LlamaForCausalLM), model.safetensors, tokenizer.json,
                and the chat template: chat_template.jinja, or `chat_template` in
                tokenizer_config.json
    GGUF        a Llama-family .gguf file: dequantized to fp32 with transformers + gguf
                (prebuild/artifact.py `convert`)

The output folder holds the four artifact files and manifest.json: the sha256 and size of every
file, the version derived from the checksums, and the compatibility key. What is missing or
unsupported is a `BuildError` naming it; nothing is left in the output folder then.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from artifacts.manifest import Manifest, derive_compatibility_key, derive_version, sha256_file, verify
from engine.config import LlamaConfig
from prebuild.artifact import ARTIFACT_FILES, convert, file_sizes

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM",)


class BuildError(Exception):
    """The source cannot become an artifact: a missing file or an unsupported architecture."""


def build(source: Path, out: Path, name: str) -> Manifest:
    """Writes the artifact of `source` (an HF folder or a .gguf file) into `out` (absent or empty)."""
    if out.exists() and any(out.iterdir()):
        raise BuildError(f"output folder {out} is not empty")
    if not source.exists():
        raise BuildError(f"source {source} does not exist")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    try:
        if source.is_file() and source.suffix == ".gguf":
            manifest = convert(source, staging, name)
        elif source.is_dir():
            manifest = _from_hf_folder(source, staging, name)
        else:
            raise BuildError(f"source {source} is neither a Hugging Face folder nor a .gguf file")
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    verify(out)
    return manifest


def _from_hf_folder(source: Path, out: Path, name: str) -> Manifest:
    config_path = source / "config.json"
    if not config_path.is_file():
        raise BuildError(f"{source}: config.json is missing")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as e:
        raise BuildError(f"{source}: config.json is not valid JSON") from e
    architectures = config.get("architectures") or []
    architecture = architectures[0] if architectures else None
    if architecture not in SUPPORTED_ARCHITECTURES:
        supported = ", ".join(SUPPORTED_ARCHITECTURES)
        raise BuildError(f"{source}: architecture {architecture!r} is not supported (supported: {supported})")
    try:
        LlamaConfig.from_dict(config)
    except (KeyError, TypeError, ValueError) as e:
        raise BuildError(f"{source}: config.json lacks or has a malformed field: {e}") from e
    missing = [f for f in ("model.safetensors", "tokenizer.json") if not (source / f).is_file()]
    template = _chat_template(source)
    if template is None:
        missing.append("chat_template.jinja (or chat_template in tokenizer_config.json)")
    if missing:
        raise BuildError(f"{source}: missing {', '.join(missing)}")
    assert template is not None
    shutil.copyfile(config_path, out / "config.json")
    shutil.copyfile(source / "model.safetensors", out / "model.safetensors")
    shutil.copyfile(source / "tokenizer.json", out / "tokenizer.json")
    (out / "chat_template.jinja").write_text(template)
    files = {f: sha256_file(out / f) for f in ARTIFACT_FILES}
    quantization = str((config.get("quantization") or {}).get("scheme", "none"))
    manifest = Manifest(
        name=name,
        version=derive_version(files),
        compatibility_key=derive_compatibility_key(architecture, files, quantization),
        files=files,
        context_length=int(config["max_position_embeddings"]),
        source={"folder": source.name},
        quantization=quantization,
        sizes=file_sizes(out, files),
    )
    (out / "manifest.json").write_text(manifest.to_json())
    return manifest


def _chat_template(source: Path) -> str | None:
    if (source / "chat_template.jinja").is_file():
        return (source / "chat_template.jinja").read_text()
    tokenizer_config = source / "tokenizer_config.json"
    if tokenizer_config.is_file():
        template = json.loads(tokenizer_config.read_text()).get("chat_template")
        if isinstance(template, str) and template:
            return template
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llmctl build", description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a Hugging Face folder or a .gguf file")
    parser.add_argument("out", type=Path, help="the artifact folder to write (absent or empty)")
    parser.add_argument("--name", required=True, help="model name, e.g. smollm2-135m")
    args = parser.parse_args(argv)
    try:
        manifest = build(args.source, args.out, args.name)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{manifest.version_id}\t{args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
