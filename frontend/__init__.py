"""The gRPC frontend: authentication, templates and tokenization, validation, dispatch to Triton
workers, and the ordered event stream back to the client."""
