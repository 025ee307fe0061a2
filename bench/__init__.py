"""Benchmarks: `python -m bench <name>` or `python -m bench.<name>`; reports, never timed tests."""
