"""What an API key may call: its scopes, one encoding for the store (control/api_keys.py), the
frontend's authentication (frontend/auth.py) and the clients (llmctl, the console)."""

from __future__ import annotations

GENERATE = "generate"  # the model: Generations (starting, following, cancelling generations)
USAGE = "usage"  # the account: usage and spend, the tenant's own keys (the console signs in with it)
SCOPES = (GENERATE, USAGE)  # a key holds a non-empty subset; ListModels needs only a tenant's key
