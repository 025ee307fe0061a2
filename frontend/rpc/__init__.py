"""The gRPC transport: the public server and its servicers, which only adapt protobuf to the
shared calls (frontend/calls.py); the HTTP transport beside it is frontend/http/.

    server.py     the server: services, interceptors, health and reflection
    servicers.py  Generations, Models and Usage
    converse.py   Converse: several generations of one tenant on one bidirectional stream
    handlers.py   wrapping a handler's behaviour, as the interceptors do to every RPC
"""
