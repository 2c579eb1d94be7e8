"""Shared test helpers: ``reference`` (independent Python-int oracles), ``ckks_helpers`` (small contexts,
precision checks) and ``expected`` (the expected-precision table the docs quote)."""
