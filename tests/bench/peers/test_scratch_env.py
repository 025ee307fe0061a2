"""The peers' scratch environments: when one can be used, and why not otherwise."""

from __future__ import annotations

from pathlib import Path

from bench.peers.scratch_env import ScratchEnv


def make_env(root: Path, python: bool = True, package: str | None = None) -> ScratchEnv:
    env = ScratchEnv("peer", "peerlib", root=root)
    if python:
        env.python.parent.mkdir(parents=True)
        env.python.touch()
    if package is not None:
        folder = env.prefix / "lib" / "python3.11" / "site-packages" / package
        folder.mkdir(parents=True)
        (folder / "__init__.py").touch()
    return env


def test_an_environment_with_its_package_can_be_used(tmp_path: Path) -> None:
    env = make_env(tmp_path, package="peerlib")
    assert env.missing() is None
    assert env.python == tmp_path / "peer" / "bin" / "python"


def test_a_missing_environment_says_where_it_was_looked_for(tmp_path: Path) -> None:
    env = make_env(tmp_path, python=False)
    assert env.missing() == f"no scratch environment at {tmp_path / 'peer'} (make bench-deps)"


def test_an_environment_without_its_package_says_which(tmp_path: Path) -> None:
    env = make_env(tmp_path, package="otherlib")
    assert env.missing() == f"peerlib is not installed in {tmp_path / 'peer'} (make bench-deps)"
