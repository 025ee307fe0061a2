"""The TypeScript SDK's own e2e suite (clients/typescript/test/, node's test runner) against the
live platform: resume after a cut, retry under the same request id, cancel, a quota refusal."""

from __future__ import annotations

from tests.e2e.conftest import KEY_SDK, KEY_SDK_SOLO
from tests.e2e.sdk_runner import ROOT, require, run

PACKAGE = ROOT / "clients" / "typescript"


async def test_typescript_sdk_against_the_live_platform(frontend_port: int) -> None:
    tsc = require(PACKAGE / "node_modules" / ".bin" / "tsc", "make sdk-deps")
    await run([str(tsc), "-p", "tsconfig.json"], PACKAGE, {})  # dist/ from the committed sources
    env = {
        "LLM_TARGET": f"127.0.0.1:{frontend_port}",
        "LLM_API_KEY": KEY_SDK,
        "LLM_SOLO_API_KEY": KEY_SDK_SOLO,
    }
    out = await run(["node", "--test", "--test-reporter=spec", "test/sdk.test.mjs"], PACKAGE, env)
    assert "pass 5" in out and "fail 0" in out, out
