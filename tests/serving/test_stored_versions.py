"""A worker host's READY versions from the store: one whose artifact is not on this host is
fetched (serving/artifact_fetch.py in production) and verified; without a fetcher, or when the
fetched files do not verify, it is left out."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from artifacts.manifest import ArtifactIntegrityError
from datastore.store import open_store
from frontend.catalog.cache import mark_ready
from frontend.catalog.registry import load_version
from serving.worker_set import stored_versions


def test_a_version_missing_here_is_fetched_and_verified(tiny: Path, tmp_path: Path) -> None:
    local = tmp_path / "here" / "art"  # where the store says it lives: absent on this host
    shutil.copytree(tiny, local)
    store = open_store(f"sqlite:///{tmp_path / 'c.sqlite'}")
    try:
        version = load_version(local)
        mark_ready(store, [version], now=datetime.now(UTC))
        shutil.rmtree(local)
        assert stored_versions(store, set()) == []  # no fetcher: left out
        fetched: list[str] = []

        def fetch(version_id: str) -> Path:
            fetched.append(version_id)
            into = tmp_path / "fetched"
            shutil.copytree(tiny, into)
            return into

        found = stored_versions(store, set(), fetch)
        assert fetched == [version.version_id]
        assert [v.version_id for v in found] == [version.version_id]
        assert found[0].artifact_dir == tmp_path / "fetched"

        def tampered(version_id: str) -> Path:
            into = tmp_path / "tampered"
            shutil.copytree(tiny, into)
            (into / "chat_template.jinja").write_text("not the manifest's")
            return into

        assert stored_versions(store, set(), tampered) == []  # refused: never loaded

        def unreachable(version_id: str) -> Path:
            raise ArtifactIntegrityError("the repository's manifest names another artifact")

        assert stored_versions(store, set(), unreachable) == []
        assert stored_versions(store, {version.version_id}, fetch) == []  # configured ones are skipped
    finally:
        store.close()
