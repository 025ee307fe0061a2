"""The CPU worker: our engine behind Triton's Python backend.

    protocol.py        what the adapter needs of Triton: requests, response senders, a log
    adapter.py         WorkerAdapter: requests in, the engine loop, exactly one FINAL per request
    tensors.py         a request's tensors -> an EngineRequest; engine outputs -> response tensors
    loader.py          verifies the artifact, loads the weights, builds the engine, starts the loop
    torch_thread.py    the one thread of the process that runs torch
    worker_metrics.py  the worker's metrics on Triton's metrics endpoint
    triton_binding.py  Triton's `triton_python_backend_utils` as the protocol (used by the shim,
                       triton_models/llm_cpu/1/model.py)

Everything here but triton_binding.py's argument is plain Python, so tests drive it with fakes and
without a Triton server.
"""
