"""The execution engine: a Llama-family model in PyTorch, its KV cache, sampler and loop.

A pure library: no gRPC, no database. Triton's Python backend drives it (triton_models/).
"""
