"""The packed CNN circuit, written once against the :class:`hemx.circuits.Evaluator` protocol.

It runs on :class:`hemx.circuits.CKKSEvaluator` (hemx ciphertexts, a context and secret-free evaluation keys) and
on :class:`hemx.circuits.SlotSimulator` (cleartext slot vectors, ``np.roll`` for rotations: checks the layout
without encryption). A "value" is a batch of slot vectors: a :class:`~hemx.ckks.Ciphertext` with leading batch
axes or a simulated one. The weights are plaintexts of that evaluator (:func:`encode_tables`). Levels used on a
fresh input at level ``depth`` = 5:

    conv (rotations at 5, products, rescale) -> square (4 -> 3) -> fc1 (babies at 3, products, rescale,
    giants at 2) -> square (2 -> 1) -> fc2 (babies at 1, products, rescale, giants at 0)

The fully connected layers keep their own baby-step/giant-step product (:func:`_matvec`) rather than
:class:`hemx.circuits.LinearTransform`: they act on 64 positions of ``B`` images each (rotations by multiples of
``B``, a ``(64, 64)`` matrix per channel rather than a ``(slots, slots)`` one) and sum the contributions of every
input channel before one shared rescale and one set of giant rotations.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hemx.apps._cnn_layout import CONV_OFFSETS, LAYERS, CircuitTables, CNNSpec, MatVecPlan
from hemx.circuits import Evaluator

Progress = Callable[[str, int, int], None]  # (layer name, layers done, total layers)


def _matvec(ev: Evaluator, x, diagonals, plan: MatVecPlan, steps_per_position: int):
    """Baby-step giant-step product of position matrices with ``x`` (batch ``(C, ...)``) -> batch ``(...)``.

    ``diagonals[gi][s]`` is the pre-rotated diagonal ``(C, 1, slots)`` of giant ``gi`` and baby ``s``
    (:func:`hemx.apps._cnn_layout.bsgs_diagonals`, in slots) as a plaintext of ``ev``
    (:func:`encode_diagonals`). The inner sums of all giant steps are stacked and
    rescaled in one call before the giant rotations, which then run one level lower (fewer limbs).
    """
    babies = plan.baby_steps
    rotated = dict(zip(babies, ev.rotate_many(x, [s * steps_per_position for s in babies])))
    wanted = set(plan.diagonals)
    inner = []
    for gi, g in enumerate(plan.giants):
        acc = None
        for s in babies:
            if g * plan.baby + s not in wanted:
                continue
            term = ev.mul_plain(rotated[s], diagonals[gi][s])
            acc = term if acc is None else ev.add(acc, term)
        inner.append(ev.sum_leading(acc))
    inner = ev.rescale(ev.stack(inner))
    out = None
    for gi, g in enumerate(plan.giants):
        part = ev.take(inner, gi)
        part = ev.rotate(part, g * plan.baby * steps_per_position) if g else part
        out = part if out is None else ev.add(out, part)
    return out


def run_circuit(ev: Evaluator, x, tables: CircuitTables, spec: CNNSpec, progress: Progress | None = None):
    """The packed CNN on input values ``x`` (batch ``(n_ct,)`` of slot vectors at level ``spec.depth``) -> logits
    in slot groups 0..9, at level 0. ``tables`` holds ``ev``'s plaintexts (:func:`encode_tables`)."""
    step = spec.images_per_ciphertext
    done = 0

    def report(name):
        nonlocal done
        done += 1
        if progress is not None:
            progress(name, done, len(LAYERS))

    # convolution: one hoisted rotation per kernel tap, every channel from the same rotations -> (C, n_ct)
    taps = ev.rotate_many(x, [o * step for o in CONV_OFFSETS])
    acc = None
    for k, tap in enumerate(taps):
        term = ev.mul_plain(tap, tables.conv_w[k])
        acc = term if acc is None else ev.add(acc, term)
    h = ev.add(ev.rescale(acc), tables.conv_b)
    report(LAYERS[0])
    h = ev.rescale(ev.mul(h, h))
    report(LAYERS[1])
    h = ev.add(_matvec(ev, h, tables.fc1, spec.fc1, step), tables.fc1_b)  # (n_ct,)
    report(LAYERS[2])
    h = ev.rescale(ev.mul(h, h))
    report(LAYERS[3])
    out = ev.add(_matvec(ev, ev.stack([h]), tables.fc2, spec.fc2, step), tables.fc2_b)
    report(LAYERS[4])
    return out


def encode_diagonals(ev: Evaluator, diagonals, plan: MatVecPlan, level: int) -> list:
    """Pre-rotated diagonals ``[gi][s]`` as plaintexts of ``ev`` for a product at ``level`` (unused ones: None)."""
    wanted = set(plan.diagonals)
    return [[_encode(ev, diagonals[gi][s], level) if g * plan.baby + s in wanted else None
             for s in range(plan.baby)] for gi, g in enumerate(plan.giants)]


def _encode(ev: Evaluator, values, level: int):
    """A weight vector for a product at ``level``: encoded at the scale of the primes the following rescale
    removes, so that the product keeps the ciphertext's scale."""
    return ev.encode(np.asarray(values), level=level, scale=ev.rescale_divisor(level))


def encode_tables(ev: Evaluator, tables: CircuitTables, spec: CNNSpec, top_level: int) -> CircuitTables:
    """Encode the weight products once as plaintexts of ``ev``, at the level and scale where each product happens.

    A product's plaintext has the scale of the primes the following rescale removes, so that products keep
    the ciphertext's scale (what ``ctx.mul`` does with numpy values, done once instead of per call). Unused
    diagonals become ``None``. Biases stay numpy: they are encoded at the ciphertext's run-time scale.
    """
    return CircuitTables(
        conv_w=[_encode(ev, w, top_level) for w in tables.conv_w],
        conv_b=tables.conv_b,
        fc1=encode_diagonals(ev, tables.fc1, spec.fc1, top_level - 2),
        fc1_b=tables.fc1_b,
        fc2=encode_diagonals(ev, tables.fc2, spec.fc2, top_level - 4),
        fc2_b=tables.fc2_b,
    )
