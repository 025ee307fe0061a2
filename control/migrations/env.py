"""Alembic environment: runs on the connection `control.migrations` hands over (online mode only)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

import billing.models  # noqa: F401  (registers the billing tables on Base.metadata)
import control.models  # noqa: F401
from control.base import Base


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    raise RuntimeError("run migrations through control.migrations.upgrade(engine), not the alembic CLI")
run(_connection)
