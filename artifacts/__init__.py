"""The model artifact's format: a folder of files and a manifest of their sha256, and its checks.

    manifest.py      the manifest, the version derived from the files, `verify()`
    file_digests.py  each file's digest remembered by its identity, so an unchanged file is hashed once

Standard library only: the frontend, the worker, the serving roles and the set-up tools all read
artifacts, and none of them needs the engine to do it.
"""
