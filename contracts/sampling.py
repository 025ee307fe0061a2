"""Sampling settings that switch a filter off, in the encoding the public API (`SamplingParams` in
llm/v1/generations.proto) and TensorRT-LLM's `runtime_top_k` / `runtime_top_p` tensors already use,
so a value passes from the client to the engine's sampler without a translation."""

TOP_K_OFF = 0  # top_k: keep every token
TOP_P_OFF = 1.0  # top_p: the whole probability mass

# A temperature below this (0 included) decodes greedily. Sampling at temperature T draws the best
# token over one whose logit is d lower with odds exp(d / T), so below 1e-3 it already is argmax
# for any gap above ~0.02; dividing logits by ever smaller values only overflows to inf and NaN.
# The frontend normalises such temperatures to 0 at validation and the engine applies the same rule
# to whatever reaches it, so both agree on what "greedy" means.
GREEDY_BELOW_TEMPERATURE = 1e-3
