"""The store kernel shared by `control` and `billing`; it imports neither.

    base        Base (one MetaData, one naming convention) and UTCDateTime
    upsert      insert_for: INSERT … ON CONFLICT in the session's dialect
    store       open_store(url) -> Store (engine, sessions, transaction()), migrated to head
    migrations  Alembic, configured in code; self-contained DDL scripts for every table

Each package's models register their tables on `base.Base.metadata` when imported. The tables of
control and billing reference each other by table name (foreign keys are DDL, not imports).
"""
