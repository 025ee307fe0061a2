"""The serving benchmark's peers: llama.cpp and vLLM, each run from a scratch environment of its own
(`make bench-deps`), never imported.

peers.py             PEERS: whether each peer can run here, and how one load runs on it
llamacpp.py          llama.cpp in-process (through its worker) and llama-cpp-python's HTTP server
llamacpp_worker.py   the worker the scratch Python runs by path: imports nothing of this repository
vllm_peer.py         vLLM's OpenAI server on the platform's artifact (a scratch model folder)
completions.py       CompletionsTarget: a streaming /v1/completions client (also the platform's HTTP)
scratch_env.py       ScratchEnv: the peers' virtual environments under var/bench-envs/
"""
