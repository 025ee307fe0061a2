"""The frontend: the public API in front of the Triton workers, by concern.

rpc/ http/      the transports (gRPC servicers and server; the HTTP/JSON and OpenAI app): they
                only adapt their wire formats to the shared calls
calls.py        the API's calls, whatever the transport: every rule exists once
generations/    the request path: validation, admission, one generation's run, its events
dispatch/       which worker runs a generation, and the frontend's view of its workers
catalog/        the served models: versions, alias routes, tokenizers (a store cache)
admin/          the Admin service: roll-out, pushes, the model repository, drains
fleet/          what frontends and worker hosts of a fleet say to each other
auth.py         API key -> tenant; admin keys
refusals.py     what the frontend itself refuses, by meaning (domain errors, no transport)
api_errors.py   the one table from every domain error to the ApiError a client sees (status,
                reason, retry), on gRPC (rpc/interceptors.py) and HTTP (http/errors.py) alike
health.py       grpc.health.v1: servable or not;  store_health.py: is the store reachable
metrics.py      the Prometheus endpoint;  background.py: a component's named background task
"""
