"""The server's logistic-regression circuit, written once against the :class:`hemx.circuits.Evaluator` protocol.

It runs on :class:`hemx.circuits.CKKSEvaluator` (a :class:`~hemx.ckks.Context` and the secret-free evaluation
keys) and on :class:`hemx.circuits.SlotSimulator` (numpy slot vectors, ``numpy.roll`` for rotations, the same
level accounting; exact without parameters, CKKS's scale accounting with them). Running the same circuit on
both separates "is the packed algorithm right" (simulator against the textbook numpy algorithm) from "is CKKS
precise enough" (encrypted against the simulator).

Quantities, with the client's packing (see ``hemx.apps.logreg``): ``Z~ = kappa * y * x`` (labels in {-1, 1},
``kappa = sqrt(lr / n)``), and scaled weights ``v~ = v / kappa``, so ``<Z~_i, v~> = <y_i x_i, v>`` and one
gradient step ``v + lr * mean_i p(-z_i) y_i x_i`` becomes ``v~ + sum_i p(-z_i) Z~_i``. A weight vector is kept
as a ciphertext times a public factor (:class:`Scaled`) so the factor can ride in plaintext constants instead
of costing a level.
"""

from __future__ import annotations

from typing import Callable, Collection, NamedTuple, Sequence

import numpy as np

from hemx.apps._logreg_layout import Layout
from hemx.apps._logreg_sigmoid import SigmoidPoly
from hemx.circuits import Evaluator
from hemx.errors import ParameterError

Progress = Callable[[str, int, int], None]


# ------------------------------------------------------------------------------------------------------------
# products on the evaluator protocol: every product here is rescaled
# ------------------------------------------------------------------------------------------------------------


def _product(ev: Evaluator, a, b):
    """``a * b`` (two values), relinearized and rescaled (fused: one ModDown does both)."""
    return ev.mul(a, b, rescale=True)


def _times_plain(ev: Evaluator, x, values: np.ndarray, scale: float):
    """``x * values`` rescaled, the result at exactly ``scale``: the plaintext is encoded at ``x``'s level at the
    scale that lands there."""
    level = ev.level(x)
    pt = ev.encode(values, level=level, scale=scale * ev.rescale_divisor(level) / ev.scale(x))
    return ev.rescale(ev.mul_plain(x, pt))


def _times_const(ev: Evaluator, x, value: float, scale: float):
    """``x * value`` rescaled, the result at exactly ``scale`` (the scale-exact constant product)."""
    plain_scale = scale * ev.rescale_divisor(ev.level(x)) / ev.scale(x)
    return ev.rescale(ev.mul_const(x, value, plain_scale=plain_scale))


# ------------------------------------------------------------------------------------------------------------
# building blocks
# ------------------------------------------------------------------------------------------------------------


class Scaled(NamedTuple):
    """A weight-like vector stored as ``factor * ct`` with a public float ``factor``."""

    ct: object
    factor: float


def _rotate_and_sum(ev, x, steps: Sequence[int]):
    for s in steps:
        x = ev.add(x, ev.rotate(x, s))
    return x


def column_sums(ev, x, layout: Layout):
    """Each row's sum in its column 0 (other columns: partial sums running into the next row)."""
    return _rotate_and_sum(ev, x, layout.column_sum_steps)


def replicate_first_column(ev, x, layout: Layout):
    """``x`` zero outside column 0 -> column 0 copied over each row."""
    return _rotate_and_sum(ev, x, layout.replicate_steps)


def row_sums(ev, x, layout: Layout):
    """The sum over all rows, in every row."""
    return _rotate_and_sum(ev, x, layout.row_sum_steps)


def masked_polynomial(ev: Evaluator, s, odd: Sequence[float], const: float, mask: np.ndarray,
                      result_scale: Callable[[int], float]):
    """``mask * (const + sum_k odd[k] * s^(2k+1))`` with ``result_scale(level)`` as the result's scale.

    Not :func:`hemx.circuits.evaluate_polynomial`: the coefficients are slot vectors (the mask that keeps column
    0 only), folded into the first product of every term; a constant-coefficient polynomial followed by the mask
    would cost one more level per iteration.

    ``s^(2k+1) = s * (s^2)^k``: the powers ``s^2, s^4, ...`` are squared in turn; term k starts as the plain
    product ``(odd[k] * mask) * s`` (the mask and coefficient cost no extra level) and is multiplied by the
    powers of ``s^2`` named by the bits of k. The plaintext of each term is encoded at the scale that makes the
    finished term land on the common result scale, so the terms add without a scale mismatch.
    Depth: ``1 + bit_length(len(odd) - 1)`` levels below ``s``.
    """
    top = len(odd) - 1
    powers = []  # powers[j] = s^(2^(j+1))
    for _ in range(top.bit_length()):
        base = powers[-1] if powers else s
        powers.append(_product(ev, base, base))
    chains = []
    for k, coeff in enumerate(odd):
        bits = [j for j in range(top.bit_length()) if (k >> j) & 1]
        level, ratio = ev.level(s) - 1, 1.0
        for j in bits:
            level = min(level, ev.level(powers[j]))
            ratio *= ev.scale(powers[j]) / ev.rescale_divisor(level)
            level -= 1
        chains.append((coeff, bits, level, ratio))
    target = result_scale(min(chain[2] for chain in chains))
    acc = None
    for coeff, bits, _, ratio in chains:
        term = _times_plain(ev, s, coeff * mask, target / ratio)
        for j in bits:
            term = _product(ev, term, powers[j])
        acc = term if acc is None else ev.add(acc, term)
    return ev.add(acc, const * mask)


def gradient_step(ev, data, weights: Scaled, rho: float, poly: SigmoidPoly, layout: Layout):
    """``rho * sum_i p(-z_i) Z~_i`` in every row, at the evaluator's default scale.

    ``z_i = <Z~_i, v~>`` with ``v~ = weights.factor * weights.ct``, and ``p(-z) = 1/2 - sum_k c_k z^(2k+1)``.
    Depth: 1 (inner products) + the polynomial's depth + 1 (times the data).
    """
    mask = layout.first_column_mask()
    f = weights.factor
    inner = column_sums(ev, _product(ev, data, weights.ct), layout)  # z_i / f in column 0 of row i
    odd = [-rho * c * f ** (2 * k + 1) for k, c in enumerate(poly.odd_coeffs)]
    data_scale = ev.scale(data)

    def scale_for(level: int) -> float:  # so that (p * data) rescaled has the default scale
        return ev.default_scale * ev.rescale_divisor(level) / data_scale

    p = masked_polynomial(ev, inner, odd, 0.5 * rho, mask, scale_for)
    spread = replicate_first_column(ev, p, layout)
    return row_sums(ev, _product(ev, spread, data), layout)


def combine(ev, anchor, terms: Sequence[tuple[Scaled, float]]):
    """``anchor + sum coeff * term``: each term (merged by identity) is scaled by a plain constant at the level
    just above ``anchor``'s and lands on ``anchor``'s scale, so the sum costs no level below ``anchor``."""
    merged: dict[int, list] = {}
    for term, coeff in terms:
        entry = merged.setdefault(id(term.ct), [term.ct, 0.0])
        entry[1] += coeff * term.factor
    out = anchor
    below = ev.level(anchor) + 1
    for ct, coeff in merged.values():
        if coeff == 0.0:
            continue
        lifted = ev.drop_level(ct, below) if ev.level(ct) > below else ct
        out = ev.add(out, _times_const(ev, lifted, coeff, ev.scale(anchor)))
    return out


# ------------------------------------------------------------------------------------------------------------
# the circuits
# ------------------------------------------------------------------------------------------------------------


def mini_batches(data) -> list:
    """The training data as a list of mini-batches: one ciphertext (a list or tuple of them is kept as it is).
    Iteration ``t`` uses mini-batch ``t mod len``."""
    batches = list(data) if isinstance(data, (list, tuple)) else [data]
    if not batches:
        raise ParameterError("the training data holds no mini-batch (pass at least one ciphertext)")
    return batches


def train(ev, data, *, gammas: Sequence[float], poly: SigmoidPoly, layout: Layout,
          progress: Progress | None = None):
    """``len(gammas)`` iterations of (Nesterov-accelerated) gradient ascent from zero weights.

    Textbook form (``w_0 = v_0 = 0``): ``w_{t+1} = v_t + lr * g(v_t)``,
    ``v_{t+1} = (1 - gamma_t) w_{t+1} + gamma_t w_t``; returns ``w_T`` (scaled by ``1 / kappa``). In the
    scaled units ``G_t = sum_i p(-z_i) Z~_i`` and, keeping ``Gt_t = (1 - gamma_t) G_t`` (the factor folded into
    the polynomial),
    ``v_{t+1} = Gt_t + (1 - gamma_t) v_t + gamma_t v_{t-1} + gamma_t / (1 - gamma_{t-1}) Gt_{t-1}``,
    which only scales ciphertexts that are ready early (no extra depth). Iteration 0 has ``z = 0`` everywhere, so
    ``G_0 = 1/2 * sum_i Z~_i``: rotations only, no level.

    Args:
        ev: an evaluator; ``data`` one of its ciphertexts holding ``Z~`` (``layout``), or a list of them (the
            mini-batches: iteration ``t`` uses ``data[t mod len(data)]``, :func:`mini_batches`).
        gammas: ``gamma_0 .. gamma_{T-1}`` (all zero: plain gradient ascent).
        progress: called as ``progress("train", t, T)`` after each iteration.

    Returns:
        the ciphertext of ``w_T / kappa`` replicated in every row.
    """
    total = len(gammas)
    report = progress or (lambda stage, done, count: None)
    batches = mini_batches(data)
    sums = row_sums(ev, batches[0], layout)
    if total == 1:  # w_1 = G_0
        out = ev.ready(_times_const(ev, sums, 0.5, ev.default_scale))
        report("train", 1, 1)
        return out
    first = Scaled(ev.ready(sums), 0.5 * (1.0 - gammas[0]))  # Gt_0, and v_1 = Gt_0 because w_0 = 0
    report("train", 1, total)
    v_prev, v, g_prev = None, first, first
    for t in range(1, total - 1):
        gamma = gammas[t]
        g = gradient_step(ev, batches[t % len(batches)], v, 1.0 - gamma, poly, layout)
        terms = [(v, 1.0 - gamma), (g_prev, gamma / (1.0 - gammas[t - 1]))]
        if v_prev is not None:
            terms.append((v_prev, gamma))
        new = ev.ready(combine(ev, g, terms))
        report("train", t + 1, total)
        v_prev, v, g_prev = v, Scaled(new, 1.0), Scaled(g, 1.0)
    last = gradient_step(ev, batches[(total - 1) % len(batches)], v, 1.0, poly, layout)  # w_T = v_{T-1} + G_{T-1}
    out = ev.ready(combine(ev, last, [(v, 1.0)]))
    report("train", total, total)
    return out


def predict(ev, weights, samples, layout: Layout):
    """Scores ``<x_i, w>`` of packed samples in column 0 of each row (one level)."""
    return column_sums(ev, _product(ev, samples, weights), layout)


# ------------------------------------------------------------------------------------------------------------
# training past the depth of the chain: the state is refreshed (bootstrapped) when its levels run out
# ------------------------------------------------------------------------------------------------------------

Refresh = Callable[[int, list], list]


def _distinct(items: Sequence[Scaled]) -> list:
    seen: dict[int, object] = {}
    for item in items:
        seen.setdefault(id(item.ct), item.ct)
    return list(seen.values())


def train_refreshed(ev, data, *, gammas: Sequence[float], poly: SigmoidPoly, layout: Layout, shrink: float,
                    refresh_at: Collection[int], refresh: Refresh, progress: Progress | None = None):
    """``len(gammas)`` Nesterov iterations like :func:`train`, with the state refreshed before the iterations
    ``refresh_at`` (where its levels run out: ``hemx.apps._logreg_bootstrap.refresh_iterations``).

    The state carried from iteration ``t`` to ``t + 1`` is the pair ``(w_t, v_t)`` (weights and Nesterov's
    look-ahead vector), two ciphertexts produced by the same iteration at the same level and scale:
    ``w_{t+1} = v_t + G_t`` and ``v_{t+1} = (1 - gamma_t) w_{t+1} + gamma_t w_t``. Both are kept *shrunk*:
    the gradient step's factor ``rho = 1 / shrink`` is folded into the polynomial's coefficients and the
    combination's constants, so the ciphertexts hold ``w / shrink`` and ``v / ((1 - gamma_t) shrink)`` and their
    :class:`Scaled` factors undo it in plaintext; the shrinking costs no level. Before iteration ``t`` in
    ``refresh_at``, ``refresh(t, cts)`` replaces the distinct state ciphertexts by fresh ones
    (bootstrapping: their values must then lie in [-1, 1], which ``shrink`` is chosen for). The last iteration
    uses ``rho = 1``, so the result holds ``w_T / kappa`` itself.

    Args:
        ev: an evaluator; ``data`` one of its ciphertexts holding ``Z~`` (``layout``), at a level at least that of
            the state, or a list of them (mini-batches, as for :func:`train`).
        gammas: ``gamma_0 .. gamma_{T-1}``.
        shrink: the state's divisor (a power of two keeps the constants exact).
        refresh_at: the iterations ``t`` (1 to T - 1) before which the state is refreshed.
        refresh: ``refresh(t, cts) -> cts`` (same order); called with the distinct state ciphertexts.
        progress: ``progress("train", t, T)`` after each iteration.

    Returns:
        the ciphertext of ``w_T / kappa`` replicated in every row.
    """
    total = len(gammas)
    report = progress or (lambda stage, done, count: None)
    batches = mini_batches(data)
    sums = ev.ready(row_sums(ev, batches[0], layout))  # 2 G_0: iteration 0 costs rotations only
    if total == 1:
        out = ev.ready(_times_const(ev, sums, 0.5, ev.default_scale))
        report("train", 1, 1)
        return out
    w, v = Scaled(sums, 0.5), Scaled(sums, 0.5 * (1.0 - gammas[0]))  # w_1 = G_0, v_1 = (1 - gamma_0) G_0
    report("train", 1, total)
    for t in range(1, total):
        if t in refresh_at:
            old = _distinct((w, v))
            fresh = dict(zip((id(c) for c in old), refresh(t, old)))
            w, v = Scaled(fresh[id(w.ct)], w.factor), Scaled(fresh[id(v.ct)], v.factor)
        last = t == total - 1
        rho = 1.0 if last else 1.0 / shrink
        gamma = gammas[t]
        g = gradient_step(ev, batches[t % len(batches)], v, rho, poly, layout)  # rho * G_t
        w_next = Scaled(ev.ready(combine(ev, g, [(v, rho)])), 1.0 / rho)  # rho * (v_t + G_t)
        if not last:  # rho / (1 - gamma) * v_{t+1} = rho * (G_t + v_t + gamma / (1 - gamma) w_t)
            v = Scaled(ev.ready(combine(ev, g, [(v, rho), (w, rho * gamma / (1.0 - gamma))])), (1.0 - gamma) / rho)
        w = w_next
        report("train", t + 1, total)
    return w.ct
