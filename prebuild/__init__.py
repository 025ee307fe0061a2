"""Set-up tools, run before anything is served (never imported by a serving process):

    protos.py    the Python gRPC code for protos/llm/v1/*.proto, into llm/v1/
    artifact.py  the GGUF of the default model -> our checksummed artifact (and quantized versions)
    trtllm.py    the TensorRT-LLM engine build recipe for GPU workers

Named so that it shadows no PyPI project (the old name, `build`, hid PyPA's build frontend).
"""
