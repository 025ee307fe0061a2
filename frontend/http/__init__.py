"""HTTP/JSON beside gRPC, in the frontend process and over the same calls (frontend/calls.py):
authentication, validation, admission, idempotency, resume, cancel and billing are the gRPC path's,
only the wire format differs. Starlette on uvicorn, run in the frontend's event loop.

app.py        the routes: the REST API mapped from the protos (/v1/generations, /v1/models,
              /v1/usage) and the OpenAI-compatible endpoints (/v1/chat/completions, /v1/completions)
transcode.py  JSON <-> the protobuf messages (protobuf's JSON mapping, camelCase)
openai.py     OpenAI requests -> GenerateRequest
openai_answers.py  events -> OpenAI chunks and documents
streams.py    following a generation over HTTP: server-sent events or one document, with the
              client's disconnect starting the same grace period as a gRPC stream's
errors.py     ApiError -> HTTP status, Retry-After and a JSON body (the gRPC ErrorInfo reasons)
openapi.py    the OpenAPI document of the app, its schemas generated from the proto descriptors
              (proto_schema.py) and the OpenAI bodies' written out (openai_schema.py)
server.py     the uvicorn listener ([http] listen), started beside the gRPC server
"""
