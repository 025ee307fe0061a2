"""The served models as this frontend knows them: a cache of the control store's catalog.

cache.py         seeding the store from the config at start, reading the catalog, CatalogCache
                 (refreshed when the store's catalog revision moves)
registry.py      ModelRegistry: versions, alias routes (canary weights), pinned tokenizers
tokenization.py  a version's pinned tokenizer and chat template
messages.py      versions and routes as the API's messages (ListModels, /v1/models, Admin)
"""
