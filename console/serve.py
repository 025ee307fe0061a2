"""Serving the console's files at /console: `console_routes()` for the HTTP app's extra routes.

Every answer carries a Content-Security-Policy that allows only this origin's scripts, styles and
API (no inline script, no other origin, no framing), and is revalidated on each load (`no-cache`),
so a new version of the console is picked up at once.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC = Path(__file__).resolve().parent / "static"
PREFIX = "/console"
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


class ConsoleFiles(StaticFiles):
    """The static files, each with the console's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


async def _to_index(request: Request) -> Response:
    return RedirectResponse(f"{PREFIX}/", status_code=308)


def console_routes() -> list[BaseRoute]:
    """/console (redirected to /console/) and the files under it."""
    return [
        Route(PREFIX, _to_index, methods=["GET"], include_in_schema=False),
        Mount(PREFIX, app=ConsoleFiles(directory=STATIC, html=True), name="console"),
    ]
