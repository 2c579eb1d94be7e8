"""hemx bench lstm: the stages at the tiny shape (a random 8-cell LSTM on 4 steps of 4 pooled pixels, degree-15
sigmoid / tanh) on the test-size ring with boot_16's levels (boot_12_relu: 10 levels after a bootstrap; 32
sequences per ciphertext, simulated), the options and bad counts; the encrypted stage is the benchmark's, at
boot_16."""

from __future__ import annotations

import warnings

import pytest

from hemx.bench import lstm
from hemx.ckks import InsecureParametersWarning
from hemx.errors import ParameterError
from tests.helpers.system import need_fashion_mnist


def test_tiny_plan_and_simulated_boot12_relu():
    need_fashion_mnist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        out = lstm.bench(preset="boot_12_relu", plain=20, simulate=40, tiny=True, allow_insecure=True)
    assert out["shape"] == {"steps": 4, "inputs": 4, "cells": 8, "classes": 10} and out["degree"] == 15
    assert out["sequences_per_ciphertext"] == 32 and out["plain"]["sequences"] == 20
    plan = out["plan"]
    # as at boot_16: c and h bootstrapped in every step but the last (7), the input at the bootstrap's level 10
    assert plan["bootstraps"] == 7 and plan["input_level"] == 10 and plan["slots"] == 2048
    sim = out["simulated"]
    # two ciphertext batches (the second padded); measured: 40 of 40 equal, largest logit error 5.4e-6
    assert sim["sequences"] == 40 and sim["equal_count"] == 40 and sim["max_logit_error"] < 1e-3
    assert "encrypted" not in out and out["peak_rss_gib"] > 0


def test_bad_counts():
    with pytest.raises(ParameterError):
        lstm.bench(plain=-1, tiny=True)
    with pytest.raises(ParameterError):
        lstm.bench(sequences=0, tiny=True)


def test_bench_lstm_options():
    from hemx.cli import build_parser

    args = build_parser().parse_args(["bench", "lstm", "--simulate", "20", "--degree", "7", "--tiny"])
    assert (args.simulate, args.degree, args.tiny, args.encrypted, args.sequences, args.preset, args.func) == (
        20, 7, True, False, 32, "boot_16", lstm.run_cli)
