"""Sampling settings that switch a filter off, in the encoding the public API (`SamplingParams` in
llm/v1/generations.proto) and TensorRT-LLM's `runtime_top_k` / `runtime_top_p` tensors already use,
so a value passes from the client to the engine's sampler without a translation."""

TOP_K_OFF = 0  # top_k: keep every token
TOP_P_OFF = 1.0  # top_p: the whole probability mass
