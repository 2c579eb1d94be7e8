"""Linear transforms of slot vectors: diagonals, baby-step/giant-step, hoisted baby rotations.

For a ``(s, s)`` matrix ``M`` acting on the slot vector ``x`` (``y = M x``), with ``rot(x, k)[i] = x[i + k]``
(a left rotation, as :meth:`hemx.Context.rotate`) and the diagonals ``d_k[i] = M[i, (i + k) mod s]``:

    y = sum_k d_k * rot(x, k) = sum_g rot( sum_b rot(d_{g+b}, -g) * rot(x, b), g )

where ``k = g + b`` splits every non-zero diagonal index into a giant step ``g`` (a multiple of ``n1``) and a
baby step ``b < n1`` (Halevi–Shoup; the baby/giant form of Lattigo's and OpenFHE's linear transforms). One level
is consumed. Three evaluation orders (``apply(..., hoisting=...)``), equal up to CKKS noise:

* ``"double"`` (the default on CPU with the native kernels; Bossuat et al., EUROCRYPT 2021, Sec. 4): one ModUp of ``x`` for all baby rotations,
  which stay over the extended basis ``Q_l P`` without a ModDown; the plaintext products and each giant's sum are
  formed there too (the diagonals are also encoded over ``P``); a giant rotation ModDowns only its sum's ``c1``,
  and the whole result is divided by ``P`` and rescaled in one final division
  (:func:`hemx.ckks.evaluator.bsgs_double_hoisted`). On the :class:`SlotSimulator` (no key switching) the same
  order of rotations, products and sums with one rescale at the end.
* ``"single"``: the baby rotations share one ModUp but each ends in its own ModDown
  (:meth:`hemx.Context.rotate_many`); each giant's inner sum is rescaled before its rotation, so giant rotations
  run one level lower.
* ``"none"``: every rotation on its own (for comparison).

``"auto"`` (the default) picks ``"double"`` where the context's key switching runs hemx's fused native passes
(CPU, one device; measured faster there, ``docs/results/bootstrap-profile-cpu.md``) and ``"single"`` elsewhere.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import numpy as np

from hemx.circuits.evaluator import CKKSEvaluator, SimPlaintext, SlotSimulator, as_evaluator
from hemx.ckks import Context, Plaintext
from hemx.ckks import evaluator as ckks_evaluator
from hemx.ckks import keyswitch
from hemx.errors import LevelError, ParameterError
from hemx.kernels import automorphism

DEFAULT_BSGS_RATIO = 2.0
HOISTING = ("auto", "double", "single", "none")
# "auto": double hoisting where it was measured faster (hemx's fused native key-switching passes on CPU, one
# device: docs/results/bootstrap-profile-cpu.md), single hoisting elsewhere (other plans and backends, sharded
# contexts, whose key switching runs limb-sharded); the slot simulator's values are the same either way
DEFAULT_HOISTING = "auto"
# Double hoisting near the top of the chain pads the extended digits with zero rows to the keys' full
# ``num_p + L`` rows, so the native inner products read each key in place instead of a copy sliced to the level
# (the copy is twice the digits' size; the padding costs the missing rows' permutation and products). It does so
# when the level lacks at most 1/KEY_ROWS_SLACK of the key's rows (boot_16: CoeffsToSlots' levels, not
# SlotsToCoeffs'). FULL_KEY_ROWS forces it on (True) or off (False) for A/B comparisons; None: that rule.
KEY_ROWS_SLACK = 8
FULL_KEY_ROWS: bool | None = None


def diagonals(matrix: np.ndarray) -> np.ndarray:
    """All ``s`` generalized diagonals of an ``(s, s)`` matrix: ``out[k, i] = M[i, (i + k) mod s]``."""
    s = matrix.shape[0]
    i = np.arange(s)
    return matrix[i[None, :], (i[None, :] + i[:, None]) % s]


def bsgs_split(indices: Sequence[int], slots: int, *, ratio: float = DEFAULT_BSGS_RATIO) -> int:
    """The baby-step count ``n1`` (a power of two) minimizing ``babies + ratio * giants`` for these diagonals.

    Baby rotations are hoisted (one ModUp for all of them) and cheaper than giant ones, hence ``ratio > 1``.
    """
    idx = np.asarray(sorted({int(k) % slots for k in indices}), dtype=np.int64)
    best, best_cost = 1, math.inf
    n1 = 1
    while n1 <= slots:
        babies = np.unique(idx % n1)
        giants = np.unique(idx - idx % n1)
        cost = np.count_nonzero(babies) + ratio * np.count_nonzero(giants)
        if cost < best_cost:
            best, best_cost = n1, cost
        n1 *= 2
    return best


def bsgs_steps(indices: Sequence[int], slots: int, *,
               ratio: float = DEFAULT_BSGS_RATIO) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``(n1, baby_steps, giant_steps, rotations)`` of the split of these diagonal indices (:func:`bsgs_split`):
    the steps ``k mod n1`` and ``k - k mod n1``, and the non-zero ones, sorted: the rotation keys a
    :class:`LinearTransform` with these non-zero diagonals needs. Host-side, nothing encoded."""
    n1 = bsgs_split(indices, slots, ratio=ratio)
    idx = np.asarray(sorted({int(k) % slots for k in indices}), dtype=np.int64)
    babies = tuple(int(b) for b in np.unique(idx % n1))
    giants = tuple(int(g) for g in np.unique(idx - idx % n1))
    return n1, babies, giants, tuple(sorted({s for s in babies + giants if s}))


class LinearTransform:
    """A plaintext matrix applied to encrypted slot vectors, prepared once.

    Args:
        backend: the :class:`~hemx.Context` (or a :mod:`hemx.circuits` evaluator such as :class:`SlotSimulator`).
        matrix: real or complex ``(slots, slots)`` array, ``slots`` the context's slot count; or a dict
            ``{k: d_k}`` of generalized diagonals (``d_k[i] = M[i, (i + k) mod slots]``, vectors of ``slots``
            numbers), for structured matrices too large to hold densely.
        level: the level of the ciphertexts it will be applied to (default: the top level); the diagonals are
            encoded there at the scale of that level's rescale, so the output has exactly the input's scale.
            Applied to a ciphertext at a higher level, the ciphertext is first dropped to ``level``; at a lower
            level the product is still correct but its scale differs from the input's by the ratio of the two
            levels' primes.
        bsgs_ratio: cost of a giant rotation relative to a hoisted baby rotation, for choosing the split.
        zero_tol: diagonals whose entries are all at most this in absolute value are skipped.
        plain_scale: scale of the encoded diagonals (default: the rescale divisor of ``level``, which keeps the
            input's scale); the output scale is ``input scale * plain_scale / divisor``.

    Attributes:
        rotations: the rotation steps whose Galois keys :meth:`apply` needs (pass to ``ctx.keygen``).
        baby_steps, giant_steps: the split; ``n1`` the baby-step count.
        indices: the non-zero diagonal indices.
    """

    def __init__(self, backend, matrix, *, level: int | None = None, bsgs_ratio: float = DEFAULT_BSGS_RATIO,
                 zero_tol: float = 0.0, plain_scale: float | None = None):
        ev = as_evaluator(backend)
        self._backend = backend
        if isinstance(matrix, dict):
            indices, rows = _check_diagonals(matrix, ev.slots)
        else:
            rows = diagonals(_check_matrix(matrix, ev.slots))
            indices = np.arange(ev.slots)
        keep = np.any(np.abs(rows) > zero_tol, axis=1)
        indices, rows = indices[keep], rows[keep]
        if not (isinstance(bsgs_ratio, (int, float)) and math.isfinite(bsgs_ratio) and bsgs_ratio > 0):
            raise ParameterError(f"bsgs_ratio must be a positive number, got {bsgs_ratio!r}")
        self.level = ev.max_level if level is None else _check_level(level, ev.max_level)
        if self.level < 1:
            raise LevelError("a linear transform consumes one level: it cannot be prepared at level 0")
        self.slots = ev.slots
        self.is_complex = bool(np.iscomplexobj(rows))
        self.indices = tuple(int(k) for k in indices)
        if not self.indices:
            raise ParameterError("the matrix is zero: nothing to transform")
        self.n1, self.baby_steps, self.giant_steps, self.rotations = bsgs_steps(self.indices, self.slots,
                                                                                ratio=float(bsgs_ratio))
        # pre-rotated diagonals rot(d_{g+b}, -g), one plaintext each, encoded in one batch
        shifted = np.stack([np.roll(row, k - k % self.n1) for k, row in zip(self.indices, rows)])
        if plain_scale is None:
            plain_scale = ev.rescale_divisor(self.level)
        elif not (isinstance(plain_scale, (int, float)) and math.isfinite(plain_scale) and plain_scale > 0):
            raise ParameterError(f"plain_scale must be a positive number, got {plain_scale!r}")
        self.plain_scale = float(plain_scale)
        # Each diagonal is kept at its period: a diagonal whose slot values repeat every p slots is a polynomial in
        # X^(N / 2p), whose NTT values repeat in runs (the bootstrapping transforms' butterfly groups: at N = 2^16
        # two of the three factors of each transform hold 1/32 and 1/1024 of the residues; boot_16's encoded
        # transforms 3.7 -> 0.8 GiB). On a context the encoder computes them in the subring (Encoder.encode_compact:
        # a period-p diagonal costs 2p / N of an encoding), with their residues modulo P for double hoisting (the
        # products are formed over Q_l P); the slot simulator keeps its values as they are.
        self._blocks, self._plaintexts, self._plain_p = {}, {}, None
        if isinstance(ev, CKKSEvaluator) and ev.ctx.mesh is None:
            special = bool(ev.ctx.num_p)
            blocks, pts, plain_p = ev.ctx.encoder.encode_compact(shifted, level=self.level,
                                                                  scale=self.plain_scale, slots=ev.slots,
                                                                  special=special)
            self._plain_p = {} if special else None
            for i, k in enumerate(self.indices):
                self._blocks[k], self._plaintexts[k] = int(blocks[i]), pts[i]
                if special:
                    self._plain_p[k] = plain_p[i]
        else:  # the slot simulator's values; a sharded context's plaintexts as its encoder places them
            plain = ev.encode(shifted, level=self.level, scale=self.plain_scale)
            for k, pt in zip(self.indices, _unstack(plain, len(self.indices))):
                if isinstance(pt, Plaintext):
                    block, (small,) = compact_rows([pt.data])
                    self._blocks[k], self._plaintexts[k] = block, pt.replace(data=small)
                else:
                    self._blocks[k], self._plaintexts[k] = 1, pt
            del plain

    def __repr__(self) -> str:
        return (f"LinearTransform(slots={self.slots}, diagonals={len(self.indices)}, n1={self.n1}, "
                f"rotations={len(self.rotations)}, level={self.level})")

    @property
    def nbytes(self) -> int:
        """Bytes of the encoded diagonals held (over ``Q_l``, and ``P`` for double hoisting), at their periods."""
        total = sum(int(np.prod(np.shape(pt.data))) * 4 for pt in self._plaintexts.values()
                    if isinstance(pt, Plaintext))
        return total + sum(int(np.prod(np.shape(x))) * 4 for x in (self._plain_p or {}).values())

    def _plaintext(self, k: int):
        """Diagonal ``k``'s plaintext at full width (the compact rows repeated; a simulator's values as they are)."""
        pt = self._plaintexts[k]
        block = self._blocks[k]
        return pt if block == 1 else pt.replace(data=ckks_evaluator.widen(pt.data, block))

    def apply(self, x, keys=None, *, hoisted: bool = True, hoisting: str | None = None):
        """``M x`` slot-wise for a ciphertext ``x`` (any batch shape): one level lower, at ``x``'s scale.

        Args:
            x: a ciphertext of the context this transform was built with.
            keys: the :class:`~hemx.KeySet` / evaluation keys holding :attr:`rotations` (None with a simulator).
            hoisting: "double", "single" or "none" (module docstring); the results agree up to CKKS noise (bit
                for bit on the simulator). "auto" (default): "double" where hemx's fused native key-switching
                passes run (CPU, one device), where it was measured faster; "single" elsewhere.
            hoisted: False is ``hoisting="none"`` (the older keyword).
        """
        hoisting = _check_hoisting(hoisting, hoisted)
        ev = self._evaluator(keys)
        if hoisting == "auto":
            hoisting = "single"
            if isinstance(ev, CKKSEvaluator) and self._plain_p is not None and ev.ctx.mesh is None and \
                    keyswitch.fused_passes(ev.ctx.plan):
                hoisting = "double"
        level = ev.level(x)
        if level < 1:
            raise LevelError("a linear transform consumes one level: the ciphertext is at level 0")
        if level > self.level:
            x = ev.drop_level(x, self.level)
        if hoisting == "double":
            if isinstance(ev, CKKSEvaluator) and self._plain_p is not None and ev.ctx.mesh is None:
                return self._apply_double(ev, x)
            if not isinstance(ev, CKKSEvaluator):
                return self._apply_sum_then_rescale(ev, x)
            hoisting = "single"  # a sharded context (limb-sharded key switching): the single-hoisted path
        steps = list(self.baby_steps)
        rotated = ev.rotate_many(x, steps) if hoisting == "single" else [ev.rotate(x, s) for s in steps]
        babies = dict(zip(steps, rotated))
        out = None
        for g in self.giant_steps:
            acc = None
            for b in self.baby_steps:
                k = g + b
                if k not in self._plaintexts:
                    continue
                term = ev.mul_plain(babies[b], self._plaintext(k))
                acc = term if acc is None else ev.add(acc, term)
            acc = ev.rescale(acc)
            if g:
                acc = ev.rotate(acc, g)
            out = acc if out is None else ev.add(out, acc)
        return out

    def _structure(self) -> tuple:
        """``((giant, ((baby, diagonal), ...)), ...)`` for :func:`hemx.ckks.evaluator.bsgs_double_hoisted`: indices
        into the non-zero giant and baby steps (-1 for the step 0) and into :attr:`indices`."""
        babies = [b for b in self.baby_steps if b]
        giants = [g for g in self.giant_steps if g]
        position = {k: i for i, k in enumerate(self.indices)}
        out = []
        for g in self.giant_steps:
            terms = tuple((babies.index(b) if b else -1, position[g + b]) for b in self.baby_steps
                          if g + b in self._plaintexts)
            if terms:
                out.append((giants.index(g) if g else -1, terms))
        return tuple(out)

    def _apply_sum_then_rescale(self, ev, x):
        """The double-hoisted order of operations through the protocol (the simulator's path): each giant's sum
        of products rotated, the giants summed, one rescale at the end."""
        rotated = dict(zip(self.baby_steps, ev.rotate_many(x, list(self.baby_steps))))
        out = None
        for g in self.giant_steps:
            acc = None
            for b in self.baby_steps:
                if g + b in self._plaintexts:
                    term = ev.mul_plain(rotated[b], self._plaintext(g + b))
                    acc = term if acc is None else ev.add(acc, term)
            if acc is None:
                continue
            if g:
                acc = ev.rotate(acc, g)
            out = acc if out is None else ev.add(out, acc)
        return ev.rescale(out)

    def _apply_double(self, ev: CKKSEvaluator, x):
        """Double hoisting on ciphertexts: one call of :func:`hemx.ckks.evaluator.bsgs_double_hoisted`."""
        ctx, keys = ev.ctx, ev._need_keys("a rotation")
        ctx._check_ct(x)
        level, n = x.level, ctx.params.n
        babies = [b for b in self.baby_steps if b % x.slots]
        giants = [g for g in self.giant_steps if g % x.slots]
        if len(babies) != sum(1 for b in self.baby_steps if b) or len(giants) != sum(1 for g in self.giant_steps if g):
            return self._apply_sum_then_rescale(ev, x)  # steps that are whole turns at x's slot count: no keys
        elements = [automorphism.galois_element(n, s % x.slots) for s in babies + giants]
        what = [f"rotation by {s}" for s in babies + giants]
        key_data = tuple(k.material for k in ctx._galois_keys(elements, keys, what, x))
        maps = tuple(ctx.tables.index_map(g) for g in elements)
        num_q = x.num_limbs
        pts = [self._plaintexts[k] for k in self.indices]
        plain_q = tuple(pt.data if pt.level == level else pt.data[..., :num_q, :] for pt in pts)  # at their periods
        plain_p = tuple(self._plain_p[k] for k in self.indices)
        blocks = tuple(self._blocks[k] for k in self.indices)
        # metadata and checks as the single-hoisted path would give them (products, sums, one rescale)
        product_scale = x.scale * self.plain_scale
        ctx._check_product_scale(product_scale, level)
        divisor = ctx.rescale_divisor(level)
        if not product_scale / divisor >= 2.0 ** -30:
            ctx._check_result_scale(product_scale / divisor, level - 1, "rescale")
        structure = self._structure()
        bound = None if x.bound is None else 0.0
        for _, terms in structure:
            part = None if x.bound is None else 0.0
            for _, d in terms:
                pb = pts[d].bound
                part = None if part is None or pb is None else part + x.bound * pb
            bound = None if bound is None or part is None else bound + part
        if bound is not None and not math.isfinite(bound):
            bound = None
        nb = len(babies)
        m = ctx.num_p + num_q
        key_rows = {k.rows for k in key_data}
        rows = key_rows.pop() if len(key_rows) == 1 else m  # keys stored to other levels: always sliced
        full = (KEY_ROWS_SLACK * (rows - m) <= rows) if FULL_KEY_ROWS is None else bool(FULL_KEY_ROWS)
        # the one-pass native key product reads every key in place at any level: nothing to pad for
        full = full and not keyswitch.reads_keys_in_place() and not any(k.compact for k in key_data)
        data = ctx._run(ckks_evaluator.bsgs_double_hoisted,
                        (x.data, maps[:nb], key_data[:nb], maps[nb:], key_data[nb:], plain_p, plain_q),
                        (ctx.plan, ctx.level_tables(level)), level, structure=structure, num_p=ctx.num_p,
                        reduction=ctx.reduction, full_key_rows=full and rows > m, blocks=blocks)
        return x.replace(data=data, level=level - 1, scale=product_scale / divisor, bound=bound,
                         is_complex=x.is_complex or any(pt.is_complex for pt in pts))

    def _evaluator(self, keys):
        if isinstance(self._backend, Context):
            return CKKSEvaluator(self._backend, keys)
        if isinstance(self._backend, CKKSEvaluator):
            return CKKSEvaluator(self._backend.ctx, keys if keys is not None else self._backend.keys,
                                 slots=self._backend.slots)
        return as_evaluator(self._backend)


def linear_transform(backend, x, matrix, keys=None, **options):
    """``M x`` in one call: :class:`LinearTransform` prepared at ``x``'s level, then applied."""
    ev = as_evaluator(backend)
    return LinearTransform(backend, matrix, level=ev.level(x), **options).apply(x, keys)


def _check_matrix(matrix, slots: int) -> np.ndarray:
    try:
        m = np.asarray(matrix)
    except (TypeError, ValueError):
        raise ParameterError("matrix must be a 2-D array of numbers") from None
    if m.ndim != 2 or not np.issubdtype(m.dtype, np.number) or m.dtype == bool:
        raise ParameterError(f"matrix must be a 2-D array of numbers, got {m.dtype} with shape {m.shape}")
    if m.shape != (slots, slots):
        raise ParameterError(f"matrix must be ({slots}, {slots}) for {slots} slots, got {m.shape}; pad it, or "
                             "create the context with Context(params, slots=...) to match")
    if not np.all(np.isfinite(m)):
        raise ParameterError("matrix entries must be finite")
    return m.astype(np.complex128 if np.iscomplexobj(m) else np.float64)


def _check_diagonals(diags: dict, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """``{k: d_k}`` -> (sorted indices mod ``slots``, their diagonals ``(count, slots)``), repeated indices summed."""
    merged: dict[int, np.ndarray] = {}
    for k, d in diags.items():
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ParameterError(f"diagonal indices must be integers, got {k!r}")
        try:
            v = np.asarray(d)
        except (TypeError, ValueError):
            raise ParameterError(f"diagonal {k} must be a vector of numbers") from None
        if v.shape != (slots,) or not np.issubdtype(v.dtype, np.number) or not np.all(np.isfinite(v)):
            raise ParameterError(f"diagonal {k} must hold {slots} finite numbers, got {v.dtype} {v.shape}")
        key = int(k) % slots
        merged[key] = merged[key] + v if key in merged else v
    if not merged:
        raise ParameterError("no diagonals given")
    keys = sorted(merged)
    rows = np.stack([merged[k] for k in keys])
    rows = rows.astype(np.complex128 if np.iscomplexobj(rows) else np.float64)
    return np.asarray(keys, dtype=np.int64), rows


def _check_hoisting(hoisting, hoisted) -> str:
    if hoisting is None:
        return DEFAULT_HOISTING if hoisted else "none"
    if hoisting not in HOISTING:
        raise ParameterError(f"hoisting must be one of {HOISTING}, got {hoisting!r}")
    if not hoisted and hoisting != "none":
        raise ParameterError(f"hoisted=False contradicts hoisting={hoisting!r}")
    return hoisting


def compact_rows(arrays) -> tuple[int, list]:
    """``(block, compact)``: the largest power of two ``block`` such that every array ``(..., N)`` is constant on each
    run of ``block`` consecutive entries of its last axis, and the arrays with one entry per run,
    ``(..., N / block)`` (:func:`hemx.ckks.evaluator.widen` gives them back exactly). Host-side (concrete arrays).
    :meth:`hemx.ckks.encoding.Encoder.encode_compact` computes the same rows in the subring, without the full
    encoding; this is the transform's path on a sharded context, and the reference its tests compare with."""
    host = [np.asarray(a) for a in arrays]
    n = host[0].shape[-1]
    block = n
    for a in host:
        flat = a.reshape(-1, n)
        change = np.nonzero(np.any(flat[:, 1:] != flat[:, :-1], axis=0))[0] + 1  # where a new run starts
        if change.size:
            block = min(block, int((change & -change).min()))  # the largest power of two dividing every start
    if block == 1:
        return 1, list(arrays)
    small = [jax.numpy.asarray(a[..., ::block]) for a in host]
    return block, small


def _check_level(level, max_level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= level <= max_level:
        raise LevelError(f"level must be an integer in 0..{max_level}, got {level!r}")
    return int(level)


def _unstack(plain, count: int) -> list:
    if isinstance(plain, SimPlaintext):
        return [SimPlaintext(plain.values[i], plain.level, plain.scale) for i in range(count)]
    if isinstance(plain, Plaintext):
        return [plain.replace(data=plain.data[i]) for i in range(count)]  # as placed (a sharded context's rows)
    raise ParameterError(f"unexpected plaintext type {type(plain).__name__}")


__all__ = ["LinearTransform", "linear_transform", "diagonals", "bsgs_split", "bsgs_steps", "SlotSimulator"]
