"""The web console in a real browser: Playwright drives Debian's Chromium against the session
platform's HTTP listener. A tenant signs in with its key, creates a key (its secret shown once, then
gone from the page), streams a playground answer, sees its usage chart grow, revokes the key, and
the next API call with it is 401; an operator signs in with the admin key and sees tenants (and
disables one), workers, models and routes, and live generations.

Each page is photographed: into the test's folder, or into docs/console/ with
LLM_CONSOLE_SCREENSHOTS set (`make console-screenshots`). Every wait is on a condition in the page
(Playwright's `expect`), never on a duration.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.e2e.conftest import KEY_ADMIN

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# as root in a sandbox, on a closed network: no sandbox, no GPU, no background connections
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
CONDITION_S = 120  # how long a condition in the page may take on a busy machine (not a measurement)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LLM_CONSOLE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def photograph(page: Page, folder: Path, name: str) -> None:
    """A full-page screenshot; a secret on the page is masked (even a test platform's key)."""
    path = folder / f"{name}.png"
    await page.screenshot(
        path=str(path), full_page=True, mask=[page.get_by_test_id("new-secret")], mask_color="#1d2430"
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def sign_in(page: Page, base: str, key: str) -> None:
    await page.goto(f"{base}/console")
    await page.get_by_test_id("api-key").fill(key)
    await page.get_by_test_id("sign-in").click()


async def chart_total(page: Page) -> int:
    chart = page.locator("svg.chart")
    await expect(chart).to_have_count(1)
    return int(await chart.get_attribute("data-total-tokens") or "0")


async def test_a_tenant_and_an_operator_use_the_console(http_url: str, browser: Browser, shots: Path) -> None:
    expect.set_options(timeout=CONDITION_S * 1000)
    name = f"console-{secrets.token_hex(3)}"
    async with httpx.AsyncClient(base_url=http_url, timeout=CONDITION_S) as http:
        admin = {"authorization": f"Bearer {KEY_ADMIN}", "x-operator": "console-test"}
        assert (
            await http.post("/v1/admin/CreateTenant", json={"tenantId": name}, headers=admin)
        ).status_code == 200
        made = await http.post(
            "/v1/admin/CreateApiKey", json={"tenantId": name, "settings": {"name": "owner"}}, headers=admin
        )
        owner = made.json()["secret"]
        page = await browser.new_page(viewport={"width": 1280, "height": 860})
        page.set_default_timeout(CONDITION_S * 1000)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        # --- the tenant --------------------------------------------------------------------
        await sign_in(page, http_url, owner)
        await expect(page.get_by_test_id("who")).to_have_text(f"tenant {name}")
        await page.get_by_test_id("key-name").fill("from the console")
        await page.get_by_role("button", name="Create key").click()
        secret = await page.get_by_test_id("new-secret").inner_text()
        assert secret.startswith("sk-")
        key_id = (await http.get("/v1/account", headers={"authorization": f"Bearer {secret}"})).json()["key"][
            "id"
        ]
        await expect(page.locator(f"tr[data-id='{key_id}']")).to_have_count(1)
        await photograph(page, shots, "tenant-keys")
        await page.get_by_test_id("secret-stored").click()
        await expect(page.get_by_test_id("secret-panel")).to_have_count(0)
        assert secret not in await page.content()  # never rendered again
        assert (
            await http.get("/v1/models", headers={"authorization": f"Bearer {secret}"})
        ).status_code == 200

        await page.get_by_test_id("nav-usage").click()
        before = await chart_total(page)
        await page.get_by_test_id("nav-playground").click()
        await page.get_by_test_id("prompt").fill("Name a colour.")
        await page.get_by_role("button", name="Send").click()
        await expect(page.get_by_test_id("playground-status")).to_have_attribute("data-done", "1")
        assert (await page.get_by_test_id("answer").inner_text()).strip()
        await expect(page.get_by_test_id("playground-status")).to_contain_text("completion tokens")
        await photograph(page, shots, "tenant-playground")

        await page.get_by_test_id("nav-usage").click()
        await expect(page.get_by_test_id("total-tokens")).not_to_have_text(f"{before:,}")
        assert await chart_total(page) > before
        await photograph(page, shots, "tenant-usage")
        await page.get_by_test_id("nav-models").click()
        await expect(page.get_by_test_id("aliases")).to_contain_text("smollm2-135m")
        await photograph(page, shots, "tenant-models")

        await page.get_by_test_id("nav-keys").click()
        row = page.locator(f"tr[data-id='{key_id}']")
        await row.get_by_test_id("revoke").click()
        await row.get_by_test_id("revoke").click()  # confirm
        await expect(page.locator(f"tr[data-id='{key_id}']")).to_contain_text("revoked")
        after = await http.get("/v1/models", headers={"authorization": f"Bearer {secret}"})
        assert (after.status_code, after.json()["error"]["reason"]) == (401, "UNAUTHENTICATED")

        # --- the operator --------------------------------------------------------------------
        await page.get_by_role("button", name="Sign out").click()
        await sign_in(page, http_url, KEY_ADMIN)
        await expect(page.get_by_test_id("who")).to_have_text("operator")
        await expect(page.get_by_test_id("tenants")).to_contain_text(name)
        await page.get_by_test_id(f"toggle-{name}").click()
        await expect(page.get_by_test_id(f"toggle-{name}")).to_have_text("Enable")
        await photograph(page, shots, "operator-tenants")
        refused = await http.post(
            "/v1/generations",
            json={"model": "smollm2-135m", "prompt": "Hi", "maxOutputTokens": 2},
            headers={"authorization": f"Bearer {owner}"},
        )
        assert (refused.status_code, refused.json()["error"]["reason"]) == (403, "TENANT_DISABLED")
        await page.get_by_test_id(f"toggle-{name}").click()
        await expect(page.get_by_test_id(f"toggle-{name}")).to_have_text("Disable")
        for nav, testid, text, shot in (
            ("workers", "workers", "local-0", "operator-workers"),
            ("routes", "aliases", "smollm2-135m", "operator-models"),
        ):
            await page.get_by_test_id(f"nav-{nav}").click()
            await expect(page.get_by_test_id(testid)).to_contain_text(text)
            await photograph(page, shots, shot)
        await page.get_by_test_id("nav-generations").click()
        await expect(page.get_by_test_id("counts")).to_contain_text("RUNNING")
        await page.get_by_label("COMPLETED").check()  # the tenant's playground generation, ended
        await expect(page.get_by_test_id("generations")).to_contain_text(name)
        await photograph(page, shots, "operator-generations")
        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_test_id("sign-in")).to_be_visible()
        await photograph(page, shots, "sign-in")
        assert errors == []
