"""The fleet's internal surfaces: what frontends and worker hosts of one fleet say to each other.

relay.py             the internal relay a frontend serves: Resume and Cancel of its generations
relay_client.py      forwarding Resume and Cancel to the frontend that runs a generation
membership.py        this frontend's registration in the store (announced, renewed, drained)
worker_directory.py  the worker pool as a cache of the store's worker registry
"""
