"""The console's server side (its files, with their security headers) and its pure ES modules,
which node's own test runner checks (tests/console/console.test.mjs); the pages themselves are
driven in a real browser by tests/e2e/test_console.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from starlette.applications import Starlette
from starlette.testclient import TestClient

from console.serve import HEADERS, console_routes

HERE = Path(__file__).resolve().parent


def test_the_files_are_served_under_console_with_a_strict_policy() -> None:
    client = TestClient(Starlette(routes=console_routes()))
    moved = client.get("/console", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (308, "/console/")
    page = client.get("/console/")
    assert page.status_code == 200 and '<script type="module" src="app.js">' in page.text
    for name, value in HEADERS.items():
        assert page.headers[name] == value
    assert "script-src 'self';" in page.headers["content-security-policy"]  # no inline script, no CDN
    module = client.get("/console/app.js")
    assert module.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
    assert client.get("/console/../serve.py").status_code == 404
    assert client.get("/console/missing.js").status_code == 404


def test_the_modules_pass_their_node_tests() -> None:
    node = shutil.which("node")
    assert node is not None, "node (installed with the SDKs' tools) runs the console's module tests"
    result = subprocess.run(
        [node, "--test", str(HERE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# pass 4" in result.stdout and "# fail 0" in result.stdout
