"""The store kernel's `Store`, under its old name for the frontend modules that still import it from
here (frontend/admin.py, frontend/catalog.py). New code imports `datastore.store`; this module goes
once those imports move.
"""

from __future__ import annotations

from datastore.store import Store, open_store

__all__ = ["Store", "open_store"]
