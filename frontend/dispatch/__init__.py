"""Which worker runs a generation, and when: the frontend's view of its Triton workers.

fair_queue.py       Ticket (a request's price in prefill tokens and KV blocks), WaitPredictor,
                    FairQueue (weighted fair order across tenants, interactive before batch)
dispatcher.py       Dispatcher: a ticket waits for a routable worker with room, then streams
worker_pool.py      WorkerPool: the workers, what each holds, their free blocks as estimated here
worker_client.py    TritonWorker: one streamed inference per generation (TensorRT-LLM tensors)
worker_liveness.py  is a worker's model alive: any response on any stream is a sign of life
"""
