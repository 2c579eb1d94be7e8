"""Shared test helpers: ``reference`` (independent Python-int oracles), ``ckks_helpers`` (small contexts,
precision checks), ``expected`` (the expected-precision table the docs quote) and ``native`` (the instruction sets
the native kernels run on this CPU)."""
