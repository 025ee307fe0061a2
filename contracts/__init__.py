"""One encoding per concept shared by the frontend, the worker and the engine.

    tier.py      Tier: the proto's values (INTERACTIVE=1, BATCH=2); lower is scheduled first
    worker.py    the worker's tensor names (TensorRT-LLM's and our extensions), its refusal reasons
    sampling.py  what "off" is for top_k and top_p
    capacity.py  an engine's KV pool and batch defaults; `blocks_for`, one formula for the
                 frontend's price of a request and the engine's reservation for it

A leaf: it imports nothing from the project and nothing outside the standard library, so the
frontend, the engine and the Triton adapter can all import it (and no torch comes with it).
"""
