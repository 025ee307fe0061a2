"""A throwaway PostgreSQL schema, for what needs a store of its own on a shared server (the tests,
the fleet benchmark): created empty, dropped with everything in it on exit. Point an engine at it
with `make_engine(url, search_path=name)`, or a URL with `?options=-csearch_path%3D<name>`."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text


@contextmanager
def scratch_schema(url: str, prefix: str = "t") -> Iterator[str]:
    """A fresh schema `<prefix>_<hex>` on the server at `url`; yields its name."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    admin = create_engine(url)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{name}"'))
        yield name
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        admin.dispose()
