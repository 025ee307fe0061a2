"""`llmctl build`: an HF folder becomes a verified artifact with sizes; what is missing or
unsupported is named, and nothing is left behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from artifacts.manifest import derive_compatibility_key, read_manifest, verify
from llmctl.cli import main as llmctl
from prebuild.build import BuildError, build
from tests.tiny_model import tiny_hf_folder


@pytest.fixture(scope="module")
def hf(artifact_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_hf_folder(artifact_dir, tmp_path_factory.mktemp("hf") / "tiny")


def test_an_hf_folder_becomes_a_verified_artifact_with_sizes_and_a_compatibility_key(
    hf: Path, tmp_path: Path, artifact_dir: Path
) -> None:
    assert llmctl(["build", str(hf), str(tmp_path / "out"), "--name", "tiny"]) == 0
    m = verify(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "chat_template.jinja",
        "config.json",
        "manifest.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    assert m.name == "tiny" and m.context_length == 2048 and m.quantization == "none"
    assert m.sizes == {name: (tmp_path / "out" / name).stat().st_size for name in m.files}
    assert m.compatibility_key == derive_compatibility_key("LlamaForCausalLM", m.files)
    # the template came from tokenizer_config.json, exactly
    assert (tmp_path / "out" / "chat_template.jinja").read_text() == (
        artifact_dir / "chat_template.jinja"
    ).read_text()
    # the same folder builds the same version
    assert (
        build(hf, tmp_path / "again", "tiny").version == m.version == read_manifest(tmp_path / "out").version
    )


@pytest.mark.parametrize(
    ("remove", "named"),
    [
        ("config.json", "config.json is missing"),
        ("model.safetensors", "missing model.safetensors"),
        ("tokenizer.json", "missing tokenizer.json"),
        ("tokenizer_config.json", "missing chat_template.jinja (or chat_template in tokenizer_config.json)"),
    ],
)
def test_a_missing_file_is_named_and_nothing_is_written(
    hf: Path, tmp_path: Path, remove: str, named: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(hf, src)
    (src / remove).unlink()
    with pytest.raises(BuildError, match=named.replace("(", r"\(").replace(")", r"\)")):
        build(src, tmp_path / "out", "tiny")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no staging folder left


def test_an_unsupported_architecture_is_refused_by_name(hf: Path, tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    shutil.copytree(hf, src)
    config = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**config, "architectures": ["MambaForCausalLM"]}))
    assert llmctl(["build", str(src), str(tmp_path / "out"), "--name", "tiny"]) == 1
    assert (
        "architecture 'MambaForCausalLM' is not supported (supported: LlamaForCausalLM)"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()
    with pytest.raises(BuildError, match=r"neither a Hugging Face folder nor a \.gguf"):
        build(src / "config.json", tmp_path / "out", "tiny")
    with pytest.raises(BuildError, match="does not exist"):
        build(tmp_path / "nope", tmp_path / "out", "tiny")
