"""Python client of the llm.v1 gRPC API.

    from llm_platform import Client

    with Client("127.0.0.1:50051", "local-dev-key") as client:
        for event in client.generate("The capital of France is", max_output_tokens=32):
            ...

`generate()` yields typed events (`Started`, `Delta`, `UsageUpdate`, `Finished`), resumes a broken
stream from the last event it delivered, and retries under one request id; failed calls raise
`ApiError` with the ErrorInfo reason and the RetryInfo delay. `constraint=json_schema(...)` (or
`regex`, `choice`, `json_object`, `lark_grammar`) asks for structured output; `logprobs=True`
puts each token's log-probability on its `Delta`. `AsyncClient` is the asyncio twin.
The generated messages and stubs are in `llm_platform.v1`.
"""

from llm_platform.aio import AsyncClient, AsyncGenerationStream
from llm_platform.client import DEFAULT_MODEL, Client, GenerationStream
from llm_platform.constraints import choice, json_object, json_schema, lark_grammar, regex
from llm_platform.errors import ApiError, QuotaViolation
from llm_platform.events import Delta, Event, Finished, Started, Usage, UsageUpdate
from llm_platform.retry import RetryPolicy

__all__ = [
    "DEFAULT_MODEL",
    "ApiError",
    "AsyncClient",
    "AsyncGenerationStream",
    "Client",
    "Delta",
    "Event",
    "Finished",
    "GenerationStream",
    "QuotaViolation",
    "RetryPolicy",
    "Started",
    "Usage",
    "UsageUpdate",
    "choice",
    "json_object",
    "json_schema",
    "lark_grammar",
    "regex",
]
