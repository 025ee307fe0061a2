"""Alembic environment: runs on the connection `datastore.migrations` hands over (online mode only).

The revision scripts are self-contained DDL: they import no models, so upgrading and downgrading
need no target metadata, and the kernel imports neither control nor billing. A new revision is
written by hand and checked against the models with `alembic.autogenerate.compare_metadata` on
`datastore.base.Base.metadata` once both packages' models are imported (tests/datastore does).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection


def run(connection: Connection) -> None:
    context.configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    raise RuntimeError("run migrations through datastore.migrations.upgrade(engine), not the alembic CLI")
run(_connection)
