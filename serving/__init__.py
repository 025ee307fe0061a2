"""The serving side: what runs while the platform serves.

triton.py      locates the `tritonserver` binary in the nvidia-pytriton wheel and runs it
deployment.py  one model version as a Triton model: its settings, and the model repository
worker/        the CPU worker inside Triton's Python-backend stub: the adapter over engine/
"""
