"""Development tools kept out of the wheel: the synthetic trace generator (tests, benchmarks, samples)."""
