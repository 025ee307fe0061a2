"""The Go SDK's own e2e suite (clients/go, `go test`) against the live platform: resume after a cut,
retry under the same request id, cancel, a quota refusal. Built in GOPATH mode against Debian's Go
packages (golang-google-grpc-dev, golang-google-protobuf-dev, golang-google-genproto-dev): the SDK
is linked into a throw-away GOPATH under its import path."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.e2e.conftest import KEY_SDK, KEY_SDK_SOLO
from tests.e2e.sdk_runner import ROOT, require, run

IMPORT_PATH = "example.com/llmplatform/go"
DEBIAN_GOPATH = Path("/usr/share/gocode")
TESTS = 5


async def test_go_sdk_against_the_live_platform(frontend_port: int, tmp_path: Path) -> None:
    go = shutil.which("go")
    assert go is not None, "the Go toolchain is missing: run `make sdk-deps` (make test does)"
    require(DEBIAN_GOPATH / "src" / "google.golang.org" / "grpc", "make sdk-deps")
    package = tmp_path / "src" / IMPORT_PATH
    package.parent.mkdir(parents=True)
    package.symlink_to(ROOT / "clients" / "go")
    env = {
        "GO111MODULE": "off",
        "GOPATH": f"{tmp_path}:{DEBIAN_GOPATH}",
        "PWD": str(package),  # the logical path: go resolves the import path through the link
        "LLM_TARGET": f"127.0.0.1:{frontend_port}",
        "LLM_API_KEY": KEY_SDK,
        "LLM_SOLO_API_KEY": KEY_SDK_SOLO,
    }
    await run([go, "vet", "./..."], package, env)  # builds everything, the example command included
    out = await run([go, "test", "-count=1", "-v", "."], package, env)
    assert out.count("--- PASS:") == TESTS and "--- FAIL" not in out, out
