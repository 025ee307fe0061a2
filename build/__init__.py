"""Set-up steps: proto code generation, the model artifact, and the Triton binary and repository."""
