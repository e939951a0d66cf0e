"""attnmt's benchmarks: `python -m benchmarks.NAME` from the repository root (benchmarks/README.md)."""
