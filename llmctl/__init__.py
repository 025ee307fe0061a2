"""`llmctl`, the command-line client of the llm.v1 API (over the Python SDK, clients/python).

    cli.py      the entry point: generate, models, workers, drain/undrain
    rollout.py  build, push, promote, roll back, retire, history

A client like any other: it imports nothing of the server's packages but the config's defaults
(the development keys), the artifact format (a push reads the manifest) and the set-up tool that
builds an artifact.
"""
