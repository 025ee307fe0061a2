"""Speculative decoding: drafting (prompt lookup in ngram.py, a draft model in draft_model.py),
verification by the target in one step (verification.py), the per-step cost model that decides
whether and how far to draft (speculation_cost.py), and the engine's entry point (speculation.py)."""
