from tests.datastore.stores import backend, migrated, store

__all__ = ["backend", "migrated", "store"]
