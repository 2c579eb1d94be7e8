"""The packed CNN circuit, written once against a small backend interface.

Two backends run it: :class:`SlotSimulator` (numpy slot vectors, ``np.roll`` for rotations: checks the layout
without encryption) and :class:`CKKSBackend` (hemx ciphertexts with a context and secret-free evaluation keys).
A "value" is a batch of slot vectors: numpy ``(..., slots)`` or a :class:`~hemx.ckks.Ciphertext` with leading
batch axes. Levels used on a fresh input at level ``depth`` = 5:

    conv (rotations at 5, products, rescale) -> square (4 -> 3) -> fc1 (babies at 3, products, rescale,
    giants at 2) -> square (2 -> 1) -> fc2 (babies at 1, products, rescale, giants at 0)
"""

from __future__ import annotations

import math
from typing import Callable, Protocol, Sequence

import jax.numpy as jnp
import numpy as np

from hemx.apps._cnn_layout import CONV_OFFSETS, LAYERS, CircuitTables, CNNSpec, MatVecPlan
from hemx.apps._cnn_params import rescale_divisor
from hemx.ckks import Ciphertext, Context, EvaluationKeys
from hemx.errors import LevelError, ParameterError

Progress = Callable[[str, int, int], None]  # (layer name, layers done, total layers)


class Backend(Protocol):
    """Operations of the circuit on batches of slot vectors (leading axes broadcast like numpy)."""

    def rotate_many(self, x, steps: Sequence[int]) -> list: ...
    def rotate(self, x, steps: int): ...
    def mul_plain(self, x, values): ...  # no rescale
    def add(self, x, y): ...
    def add_plain(self, x, values): ...
    def square(self, x): ...  # no rescale
    def rescale(self, x): ...
    def stack(self, xs: Sequence): ...  # new leading axis
    def take(self, x, index: int): ...  # one entry of the first axis
    def sum_leading(self, x): ...  # sum over the first axis


class SlotSimulator:
    """Backend on cleartext numpy slot vectors: rotations are ``np.roll``, rescaling is the identity."""

    def rotate_many(self, x, steps):
        return [self.rotate(x, s) for s in steps]

    def rotate(self, x, steps):
        return np.roll(x, -int(steps), axis=-1)

    def mul_plain(self, x, values):
        return x * values

    def add(self, x, y):
        return x + y

    def add_plain(self, x, values):
        return x + values

    def square(self, x):
        return x * x

    def rescale(self, x):
        return x

    def stack(self, xs):
        return np.stack(xs)

    def take(self, x, index):
        return x[index]

    def sum_leading(self, x):
        return x.sum(axis=0)


class CKKSBackend:
    """Backend on hemx ciphertexts: a :class:`~hemx.Context` and secret-free :class:`EvaluationKeys`."""

    def __init__(self, ctx: Context, keys: EvaluationKeys):
        if not isinstance(ctx, Context):
            raise ParameterError(f"expected a hemx.Context, got {type(ctx).__name__}")
        if not isinstance(keys, EvaluationKeys):
            raise ParameterError(f"expected hemx EvaluationKeys (keys.evaluation_keys()), got {type(keys).__name__}")
        self.ctx, self.keys = ctx, keys

    def rotate_many(self, x, steps):
        return self.ctx.rotate_many(x, steps, self.keys)

    def rotate(self, x, steps):
        return self.ctx.rotate(x, steps, self.keys)

    def mul_plain(self, x, values):
        return self.ctx.mul(x, values)

    def add(self, x, y):
        return self.ctx.add(x, y)

    def add_plain(self, x, values):
        return self.ctx.add(x, values)

    def square(self, x):
        return self.ctx.mul(x, x, self.keys)

    def rescale(self, x):
        return self.ctx.rescale(x)

    def stack(self, xs):
        first = xs[0]
        for other in xs[1:]:
            if (other.level, other.batch_shape) != (first.level, first.batch_shape) or not math.isclose(
                    other.scale, first.scale, rel_tol=1e-9):
                raise LevelError("only ciphertexts at the same level, scale and batch shape can be stacked")
        return first.replace(data=jnp.stack([c.data for c in xs]))

    def take(self, x: Ciphertext, index: int):
        return x.replace(data=x.data[index])

    def sum_leading(self, x: Ciphertext):
        acc = self.take(x, 0)
        for i in range(1, x.batch_shape[0]):
            acc = self.ctx.add(acc, self.take(x, i))
        return acc


def _matvec(be: Backend, x, diagonals, plan: MatVecPlan, steps_per_position: int):
    """Baby-step giant-step product of position matrices with ``x`` (batch ``(C, ...)``) -> batch ``(...)``.

    ``diagonals[gi][s]`` is the pre-rotated diagonal ``(C, 1, slots)`` of giant ``gi`` and baby ``s``
    (:func:`hemx.apps._cnn_layout.bsgs_diagonals`, in slots). The inner sums of all giant steps are stacked and
    rescaled in one call before the giant rotations, which then run one level lower (fewer limbs).
    """
    babies = plan.baby_steps
    rotated = dict(zip(babies, be.rotate_many(x, [s * steps_per_position for s in babies])))
    wanted = set(plan.diagonals)
    inner = []
    for gi, g in enumerate(plan.giants):
        acc = None
        for s in babies:
            if g * plan.baby + s not in wanted:
                continue
            term = be.mul_plain(rotated[s], diagonals[gi][s])
            acc = term if acc is None else be.add(acc, term)
        inner.append(be.sum_leading(acc))
    inner = be.rescale(be.stack(inner))
    out = None
    for gi, g in enumerate(plan.giants):
        part = be.take(inner, gi)
        part = be.rotate(part, g * plan.baby * steps_per_position) if g else part
        out = part if out is None else be.add(out, part)
    return out


def run_circuit(be: Backend, x, tables: CircuitTables, spec: CNNSpec, progress: Progress | None = None):
    """The packed CNN on input values ``x`` (batch ``(n_ct,)`` of slot vectors) -> logits in slot groups 0..9."""
    step = spec.images_per_ciphertext
    done = 0

    def report(name):
        nonlocal done
        done += 1
        if progress is not None:
            progress(name, done, len(LAYERS))

    # convolution: one hoisted rotation per kernel tap, every channel from the same rotations -> (C, n_ct)
    taps = be.rotate_many(x, [o * step for o in CONV_OFFSETS])
    acc = None
    for k, tap in enumerate(taps):
        term = be.mul_plain(tap, tables.conv_w[k])
        acc = term if acc is None else be.add(acc, term)
    h = be.add_plain(be.rescale(acc), tables.conv_b)
    report(LAYERS[0])
    h = be.rescale(be.square(h))
    report(LAYERS[1])
    h = be.add_plain(_matvec(be, h, tables.fc1, spec.fc1, step), tables.fc1_b)  # (n_ct,)
    report(LAYERS[2])
    h = be.rescale(be.square(h))
    report(LAYERS[3])
    out = be.add_plain(_matvec(be, be.stack([h]), tables.fc2, spec.fc2, step), tables.fc2_b)
    report(LAYERS[4])
    return out


def encode_tables(ctx: Context, tables: CircuitTables, spec: CNNSpec, top_level: int) -> CircuitTables:
    """Encode the weight products once as plaintexts, at the level and scale where each product happens.

    A product's plaintext has the scale of the primes the following rescale removes, so that products keep
    the ciphertext's scale (what ``ctx.mul`` does with numpy values, done once instead of per call). Unused
    diagonals become ``None``. Biases stay numpy: they are encoded at the ciphertext's run-time scale.
    """

    def enc(values, level):
        return ctx.encode(np.asarray(values), level=level, scale=float(rescale_divisor(ctx.params, level)))

    def enc_diagonals(diagonals, plan: MatVecPlan, level):
        wanted = set(plan.diagonals)
        return [[enc(diagonals[gi][s], level) if g * plan.baby + s in wanted else None for s in range(plan.baby)]
                for gi, g in enumerate(plan.giants)]

    return CircuitTables(
        conv_w=[enc(w, top_level) for w in tables.conv_w],
        conv_b=tables.conv_b,
        fc1=enc_diagonals(tables.fc1, spec.fc1, top_level - 2),
        fc1_b=tables.fc1_b,
        fc2=enc_diagonals(tables.fc2, spec.fc2, top_level - 4),
        fc2_b=tables.fc2_b,
    )
