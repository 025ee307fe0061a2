"""The CPU worker as Triton loads it: a shim over worker/ (WorkerAdapter does the work).

Triton's Python backend imports this file from the materialized model repository; `serving` and
`engine` come from the project, installed in the virtual environment the stub runs with.
"""

import json

import triton_python_backend_utils as pb_utils

from worker.deployment import ModelDeployment
from worker.loader import start_worker
from worker.triton_binding import TritonMetrics, TritonRequest


class TritonPythonModel:
    def initialize(self, args):
        deployment = ModelDeployment.from_model_config(json.loads(args["model_config"]))
        self.worker = start_worker(deployment, TritonMetrics(pb_utils), pb_utils.Logger)

    def execute(self, requests):
        for request in requests:
            self.worker.submit(TritonRequest(pb_utils, request))
        return None  # decoupled: the worker's loop sends every response

    def finalize(self):
        worker = getattr(self, "worker", None)  # none when initialize() failed
        if worker is not None:
            worker.close()
