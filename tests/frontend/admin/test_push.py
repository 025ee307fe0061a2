"""An upload into the repository without a server (frontend/admin/push.py): the refusals the e2e suite
cannot reach over gRPC in order, and that every refusal and abort leaves no staging folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from artifacts.manifest import Manifest, derive_compatibility_key, derive_version, sha256_file
from frontend.admin.push import STAGING, PushRefused, Repository

FILES = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"]}',
    "model.safetensors": b"w" * 100,
    "tokenizer.json": b"{}",
    "chat_template.jinja": b"",  # an empty file is a file too
}


def artifact(tmp_path: Path) -> tuple[Path, bytes]:
    src = tmp_path / "src"
    src.mkdir()
    for name, data in FILES.items():
        (src / name).write_bytes(data)
    files = {name: sha256_file(src / name) for name in FILES}
    manifest = Manifest(
        name="m",
        version=derive_version(files),
        compatibility_key=derive_compatibility_key("LlamaForCausalLM", files),
        files=files,
        context_length=64,
        source={},
        sizes={name: len(data) for name, data in FILES.items()},
    )
    return src, manifest.to_json().encode()


def test_an_upload_moves_in_whole_and_nothing_is_left_staged(tmp_path: Path) -> None:
    _, manifest = artifact(tmp_path)
    repo = Repository(tmp_path / "repo", 1000)
    upload = repo.upload(manifest)
    assert upload.start() is None
    for name, data in FILES.items():
        half = len(data) // 2
        upload.write(name, 0, data[:half])
        upload.write(name, half, data[half:])
    final = upload.finish()
    upload.abort()  # a no-op once moved in
    assert final == repo.root / "m" / upload.manifest.version
    assert sorted(p.name for p in final.iterdir()) == sorted([*FILES, "manifest.json"])
    assert not any((repo.root / STAGING).iterdir())
    assert repo.upload(manifest).start() == final  # the same artifact again: already present


@pytest.mark.parametrize(
    ("write", "reason"),
    [
        (("model.safetensors", 0, b"w" * 101), "SIZE_MISMATCH"),
        (("weights.bin", 0, b"w"), "UNKNOWN_FILE"),
        (("model.safetensors", 5, b"w"), "OUT_OF_ORDER"),
    ],
)
def test_a_bad_chunk_is_refused_at_once(tmp_path: Path, write: tuple[str, int, bytes], reason: str) -> None:
    _, manifest = artifact(tmp_path)
    upload = Repository(tmp_path / "repo", 1000).upload(manifest)
    upload.start()
    with pytest.raises(PushRefused) as e:
        upload.write(*write)
    assert e.value.reason == reason
    upload.abort()
    assert not any((tmp_path / "repo" / STAGING).iterdir())


def test_a_manifest_without_sizes_or_with_an_unsafe_name_is_refused(tmp_path: Path) -> None:
    _, manifest = artifact(tmp_path)
    raw = json.loads(manifest)
    for changed in ({k: v for k, v in raw.items() if k != "sizes"}, {**raw, "name": "../etc"}):
        with pytest.raises(PushRefused) as e:
            Repository(tmp_path / "repo", 1000).upload(json.dumps(changed).encode()).start()
        assert e.value.reason == "MANIFEST_INVALID"
    assert not (tmp_path / "repo").exists()
