"""The request path: one generation in the frontend, from its validated request to its sealed end.

validation.py   GenerateRequest -> ValidatedRequest (the one place client input is checked)
offload.py      tokenization and template rendering off the event loop, bounded
manager.py      GenerationManager: admit (lifecycle/), cancel, get; the runs' background work
run_loop.py     RunLoop: one run from QUEUED to its sealed end, with the store and billing
run.py          GenerationRun: worker responses in, ordered GenerationEvents out
stops.py        stop strings over streamed text
stream_log.py   EventLog: a generation's retained, bounded, resumable events
live.py         LiveGeneration / LiveRegistry: the runs this frontend holds, and their followers
reader.py       Follower / Reader: what a client stream reads (local or relayed)
leases.py       LeaseKeeper: renews live runs' attempt leases, sweeps expired ones
cache_salt.py   the tenant's prefix-cache salt each request carries to its worker
telemetry.py    one trace and one set of latency figures per generation
message.py      a recorded generation as the API's Generation message
"""
