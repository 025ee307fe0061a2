"""Alembic, configured in code (no alembic.ini): `upgrade(engine)` runs at every start-up.

On PostgreSQL the upgrade holds a transaction-level advisory lock, so frontends starting together
migrate one after another; on SQLite `BEGIN IMMEDIATE` serialises them.

One linear history for every table of the store: 0001 control, 0002 billing, 0003 the catalog's
authority (control), 0004 the fleet (frontend registrations, owners, worker leases and pools).
The scripts moved here from control/migrations with their revision ids unchanged, so an existing
store upgrades as before.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

MIGRATIONS_DIR = Path(__file__).parent
ADVISORY_LOCK_KEY = 0x6C6C6D_636F6E74  # "llm" "cont": one key per store


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def heads() -> tuple[str, ...]:
    return tuple(ScriptDirectory.from_config(alembic_config()).get_heads())


def upgrade(engine: Engine, revision: str = "head") -> None:
    with engine.begin() as connection:
        _lock(connection)
        command.upgrade(alembic_config(connection), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    with engine.begin() as connection:
        _lock(connection)
        command.downgrade(alembic_config(connection), revision)


def current(engine: Engine) -> str | None:
    """The revision the store is at; None for an empty store."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
