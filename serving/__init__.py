"""The serving side: process roles and what runs while the platform serves.

platform.py    the all-in-one platform (`make serve`): workers, frontend, supervisor
fleet_frontend.py  the fleet's frontend role (`python -m serving frontend`): no workers of its own
worker_host.py the fleet's worker-host role (`python -m serving worker`): Triton workers, registered
frontend_node.py   one frontend's servers and use cases, whatever feeds its worker pool
worker_set.py  the Triton workers one process tree starts, loads and records READY
workers.py     this machine's Triton workers: ids, ports, and what their engines are started with
supervisor.py  restarts dead or hung workers, heartbeats the worker registry
probes.py      what tells that a running worker failed: identity, readiness, canaries
triton.py      runs `tritonserver`: start, identity, model load/unload, stop
triton_host.py locates it in the nvidia-pytriton wheel; its backend folder, ports, environment

The CPU worker that runs inside each `tritonserver` is not here: it is the package `worker/`, beside
the engine it adapts (worker/deployment.py is the model repository both sides read).

`serving.platform.start_platform` is the public way to run the platform from Python (benchmarks,
tools). Importing this package imports none of its modules: a worker host loads no frontend."""
