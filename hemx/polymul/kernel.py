"""Device side of the matmul method: residues, Karatsuba, blocked Toeplitz matmuls, digit merge, CRT.

Everything here is a pure function of arrays and a :class:`~hemx.polymul.plan.StaticPlan`; :func:`run` is the
jitted entry point. Shapes (``Bb`` distinct b polynomials, ``R`` a polynomials per b, ``n`` coefficients):

* inputs, ``int64`` layout: ``a`` int64 ``(Bb, R, n)``, ``b`` int64 ``(Bb, n)``, values in ``[0, q)``;
* inputs, ``bytes`` layout (q above 63 bits): ``a`` uint8 ``(Bb, R, n, nbytes)`` little-endian magnitudes of the
  centered coefficients plus a bool sign ``(Bb, R, n)``; ``b`` likewise ``(Bb, n, nbytes)``, ``(Bb, n)``;
* output: int64 ``(Bb, R, n)`` in ``[0, q)`` (``direct`` / ``device`` finish) or int64 ``(Bb, R, n, words)``
  base-``2^c`` words of a value congruent to the product mod q (``host`` finish).

Toeplitz convention: a leaf of size ``h`` multiplies a row vector ``x`` by ``T[r, c] = tau[h - 1 + c - r]``
(``tau`` has ``2h - 1`` entries). For the ring product ``a * b mod (x^n - s)`` the top-level ``tau`` is
``concat(s * b[1:], b)``: entries above the diagonal are b, those below carry the ring's sign (paper Eq. 3).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from hemx.kernels.bat import chunk_decompose
from hemx.kernels._x64 import require_x64
from hemx.polymul.plan import FamilySchedule, LeafGeometry, StaticPlan

_I64 = jnp.int64
_F64 = jnp.float64


# ----------------------------------------------------------------------------------------------------------
# residues and digits
# ----------------------------------------------------------------------------------------------------------


def _bcast(v, ndim: int):
    """``(G,)`` per-modulus values -> ``(G, 1, ..., 1)`` with ``ndim`` axes in all."""
    return jnp.reshape(v, v.shape + (1,) * (ndim - v.ndim))


def residues(x, sign_mask, kind: str, mu, wts, q, half):
    """Residues of the centered coefficients modulo each ``mu``.

    Args:
        x: int64 ``(*S)`` coefficients in ``[0, q)`` (``kind="int64"``) or uint8 ``(*S, nbytes)`` magnitudes of
            the centered coefficients (``kind="bytes"``).
        sign_mask: bool ``(*S)``, True where the centered coefficient is negative (bytes only; else ignored).
        mu: int64 ``(G,)`` moduli; wts: float64 ``(G, nbytes)`` ``2^(8w) mod mu``; q, half: int64 scalars.
    Returns:
        int64 ``(G, *S)`` in ``[0, mu)``.
    """
    if kind == "int64":
        xc = jnp.where(x > half, x - q, x)
        return jnp.remainder(xc[None], _bcast(mu, xc.ndim + 1))
    # bytes * (2^(8w) mod m) summed over w < 96 stays below 2^31: exact in float64
    v = jnp.tensordot(wts, x.astype(_F64), axes=([1], [x.ndim - 1]))
    m = _bcast(mu, v.ndim)
    r = jnp.remainder(v.astype(_I64), m)
    return jnp.where(sign_mask[None], jnp.remainder(m - r, m), r)


def digits(r, mu, k: int):
    """Balanced int8 digits of the centered residues ``r mod mu`` (digit axis last, length ``k``).

    ``r`` int64 in ``[0, mu)`` with ``mu`` broadcastable; centered value ``r - mu`` when ``r > (mu - 1) // 2``.
    """
    c = jnp.where(r > (mu - 1) // 2, r - mu, r).astype(jnp.int32)
    if k == 1:
        return c.astype(jnp.int8)[..., None]
    return chunk_decompose(c, k, 8, axis=-1)


# ----------------------------------------------------------------------------------------------------------
# Karatsuba on Toeplitz products (paper §4), all sums taken mod each channel modulus
# ----------------------------------------------------------------------------------------------------------


def karatsuba_split(x, tau, mu):
    """One level: ``x (G, F, Bb, R, 2h)``, ``tau (G, F, Bb, 4h - 1)`` -> ``(G, 3F, Bb, R, h)``, ``(G, 3F, Bb, 2h - 1)``.

    With ``T = [[T0, T1], [T-1, T0]]`` (blocks of the Toeplitz matrix, ``T_D`` built from
    ``tau[h + D h : 3h - 1 + D h]``), ``y0 = x0 T0 + x1 T-1 = P + Q0`` and ``y1 = x0 T1 + x1 T0 = P + Q1`` with
    ``P = (x0 + x1) T0``, ``Q0 = x1 (T-1 - T0)``, ``Q1 = x0 (T1 - T0)``: three half-size Toeplitz products.
    """
    h = x.shape[-1] // 2
    m5, m4 = _bcast(mu, 5), _bcast(mu, 4)
    x0, x1 = x[..., :h], x[..., h:]
    xs = jnp.stack([jnp.remainder(x0 + x1, m5), x1, x0], axis=2)
    t_m1, t_0, t_1 = tau[..., : 2 * h - 1], tau[..., h : 3 * h - 1], tau[..., 2 * h :]
    ts = jnp.stack([t_0, jnp.remainder(t_m1 - t_0, m4), jnp.remainder(t_1 - t_0, m4)], axis=2)
    g, f = x.shape[:2]
    return xs.reshape((g, 3 * f) + xs.shape[3:]), ts.reshape((g, 3 * f) + ts.shape[3:])


def karatsuba_join(y, mu):
    """Inverse bookkeeping of :func:`karatsuba_split`: ``(G, 3F, Bb, R, h)`` -> ``(G, F, Bb, R, 2h)``."""
    g, f3 = y.shape[:2]
    y = y.reshape((g, f3 // 3, 3) + y.shape[2:])
    m = _bcast(mu, 5)
    p, q0, q1 = y[:, :, 0], y[:, :, 1], y[:, :, 2]
    return jnp.concatenate([jnp.remainder(p + q0, m), jnp.remainder(p + q1, m)], axis=-1)


# ----------------------------------------------------------------------------------------------------------
# leaf: blocked Toeplitz product as int8 matmuls (paper §2.2 + §2.5)
# ----------------------------------------------------------------------------------------------------------


def _hankel_index(rows: int, cols: int) -> np.ndarray:
    return np.arange(rows)[:, None] + np.arange(cols)[None, :]


def leaf_product(x, tau, mu, fold, geo: LeafGeometry, k: int, sign: int, engine: str):
    """``y = x @ Toeplitz(tau) mod mu`` for every problem, through int8 matmuls of the balanced digits.

    Args:
        x: int64 ``(P, Bb, R, h)`` residues; tau: int64 ``(P, Bb, 2h - 1)`` residues (see module docstring).
        mu: int64 ``(P,)`` moduli; fold: int64 ``(P, k)`` with ``2^(8i) mod mu``.
        geo: blocking; k: digits per residue; sign: the ring sign used when ``geo.wrap``.
        engine: "int8" or "float32".
    Returns:
        int64 ``(P, Bb, R, h)`` in ``[0, mu)``.

    Block formulation: with ``t = geo.block`` and ``N_b = h / t``, block row ``J`` of ``y`` is
    ``sum_D' X[J + D'] @ B[D']`` where ``X`` lists the blocks of x (preceded by the sign-flipped copy when the
    matrix wraps, by zero blocks for a plain Toeplitz leaf) and ``B[D'][u, v'] = rho[D' t + u + v']`` is a
    Hankel block of the reversed ``tau`` (output columns come out reversed, ``v' = t - 1 - v``). Both operands are
    gathered on the device from O(h) data, chunk by chunk over ``D'``.

    Digits: ``x = sum_i 2^(8i) x_i`` and for b the BAT fold ``tau_i = 2^(8i) tau mod mu = sum_o 2^(8o) d_io``, so
    ``y = sum_o 2^(8o) sum_i x_i @ T(d_io) (mod mu)``: one contraction over (i, D', u) per output digit o.
    """
    p, bb, r, h = x.shape
    t, nb, ndiag, dc, nch = geo.block, geo.nblocks, geo.ndiag, geo.chunk, geo.nchunks
    npad = dc * nch
    m4 = _bcast(mu, 4)

    def blocks(v):  # (P, Bb, R, h) residues -> (P, Bb, k, R, N_b, t) digits
        d = digits(v, m4, k).reshape(p, bb, r, nb, t, k)
        return jnp.transpose(d, (0, 1, 5, 2, 3, 4))

    xd = blocks(x)
    if geo.wrap:
        low = xd if sign == 1 else blocks(jnp.remainder(m4 - x, m4))
        xe = jnp.concatenate([low, xd], axis=4)[:, :, :, :, 1:]
    else:
        z = jnp.zeros(xd.shape[:4] + (nb - 1, t), jnp.int8)
        xe = jnp.concatenate([z, xd, z], axis=4)
    need = nb + npad - 1
    xe = jnp.pad(xe, [(0, 0)] * 4 + [(0, need - xe.shape[4]), (0, 0)])

    tf = jnp.remainder(tau[:, :, None, :] * fold[:, None, :, None], _bcast(mu, 4))  # (P, Bb, k_i, 2h - 1)
    rho = tf[..., ::-1][..., : ndiag * t + t - 1]
    rd = jnp.moveaxis(digits(rho, _bcast(mu, 4), k), -1, 3)  # (P, Bb, k_i, k_o, L)
    rd = jnp.pad(rd, [(0, 0)] * 4 + [(0, (npad + 1) * t - rd.shape[-1])])

    idx_x = jnp.asarray(_hankel_index(nb, dc))
    idx_b = jnp.asarray(_hankel_index(t, t))
    acc_dtype = jnp.int32 if engine == "int8" else jnp.float32

    def chunk(c):
        d0 = c * dc
        w = lax.dynamic_slice_in_dim(xe, d0, nb + dc - 1, axis=4)
        a_t = jnp.take(w, idx_x, axis=4)  # (P, Bb, k, R, N_b, dc, t)
        rw = lax.dynamic_slice_in_dim(rd, d0 * t, (dc + 1) * t, axis=4).reshape(p, bb, k, k, dc + 1, t)
        win = jnp.concatenate([rw[..., :-1, :], rw[..., 1:, :]], axis=-1)  # (P, Bb, k_i, k_o, dc, 2t)
        b_t = jnp.take(win, idx_b, axis=-1)  # (P, Bb, k_i, k_o, dc, t, t)
        if engine == "float32":
            a_t, b_t = a_t.astype(jnp.float32), b_t.astype(jnp.float32)
        out = jnp.einsum("pbiRJDu,pbioDuv->pboRJv", a_t, b_t, preferred_element_type=acc_dtype)
        return out.astype(_I64)

    if nch == 1:
        zsum = chunk(0)
    else:
        def body(acc, c):
            return acc + chunk(c), None

        zsum, _ = lax.scan(body, jnp.zeros((p, bb, k, r, nb, t), _I64), jnp.arange(nch))
    zsum = zsum[..., ::-1].reshape(p, bb, k, r, h)
    m = _bcast(mu, 4)
    y = jnp.zeros((p, bb, r, h), _I64)
    for o in range(k):
        y = jnp.remainder(y + jnp.remainder(zsum[:, :, o], m) * _bcast(fold[:, o], 4), m)
    return y


# ----------------------------------------------------------------------------------------------------------
# one family of moduli: residues -> Karatsuba -> leaves -> merged residues of the product
# ----------------------------------------------------------------------------------------------------------


def family_products(a, a_neg, b, b_neg, tabs, sp: StaticPlan, fs: FamilySchedule, q, half):
    """Residues of the exact product modulo a group of moduli.

    Args:
        a, a_neg, b, b_neg: kernel inputs (see module docstring); tabs: this step's family tables (``mu`` (G,),
            ``fold`` (G, K), ``wts`` (G, nbytes)); q, half: int64 scalars.
    Returns:
        int64 ``(G, Bb, R, n)`` in ``[0, mu)``.
    """
    mu = tabs["mu"]
    ra = residues(a, a_neg, sp.input_kind, mu, tabs["wts"], q, half)  # (G, Bb, R, n)
    rb = residues(b, b_neg, sp.input_kind, mu, tabs["wts"], q, half)  # (G, Bb, n)
    m3 = _bcast(mu, 3)
    low = rb[..., 1:] if sp.sign == 1 else jnp.remainder(m3 - rb[..., 1:], m3)
    tau = jnp.concatenate([low, rb], axis=-1)[:, None]  # (G, 1, Bb, 2n - 1)
    x = ra[:, None]  # (G, 1, Bb, R, n)
    for _ in range(sp.karatsuba):
        x, tau = karatsuba_split(x, tau, mu)
    g, f = x.shape[:2]
    xf = x.reshape((g * f,) + x.shape[2:])
    tf = tau.reshape((g * f,) + tau.shape[2:])
    mu_f = jnp.repeat(mu, f)
    fold_f = jnp.repeat(tabs["fold"], f, axis=0)
    y = leaf_product(xf, tf, mu_f, fold_f, fs.leaf, fs.digits, sp.sign, sp.engine)
    y = y.reshape((g, f) + y.shape[1:])
    for _ in range(sp.karatsuba):
        y = karatsuba_join(y, mu)
    return y[:, 0]


# ----------------------------------------------------------------------------------------------------------
# CRT to mod q (exact): float64 word sums, int64 carries, Horner steps
# ----------------------------------------------------------------------------------------------------------


def crt_accumulate(carry, r, inv, mu, wmat, invm):
    """Add one group's CRT terms: ``S += y @ W`` and ``F += y / m`` with ``y = r * inv mod m``.

    ``carry = (S, F)``: float64 ``(*S, words)`` and ``(*S)``; ``r`` int64 ``(G, *S)``; ``wmat`` ``(G, words)``.
    Every partial sum is an integer below 2^53 (word width chosen by the plan), so the float64 sums are exact.
    """
    s, f = carry
    m = _bcast(mu, r.ndim)
    y = jnp.remainder(r * _bcast(inv, r.ndim), m).astype(_F64)
    s = s + jnp.tensordot(y, wmat, axes=([0], [0]))
    f = f + jnp.tensordot(y, invm, axes=([0], [0]))
    return s, f


def crt_finish(carry, walpha, q, word_bits: int, finish: str):
    """``c mod q`` (int64 ``(*S)``) or its base-``2^c`` words (``finish="host"``) from the accumulated sums.

    ``F = sum y_i / m_i = alpha + c / M`` with ``|c| / M < 1/2 - 2^-21``, so ``alpha = round(F)``; then
    ``c = sum y_i (M / m_i) - alpha M`` is congruent mod q to ``S + alpha * (-M mod q) >= 0``.
    """
    s, f = carry
    alpha = jnp.round(f).astype(_I64)
    words = jnp.round(s).astype(_I64) + alpha[..., None] * walpha
    mask = (1 << word_bits) - 1
    carry_w = jnp.zeros(words.shape[:-1], _I64)
    out = []
    for w in range(words.shape[-1]):
        v = words[..., w] + carry_w
        out.append(v & mask)
        carry_w = v >> word_bits
    if finish == "host":
        return jnp.stack(out, axis=-1)
    acc = jnp.zeros(words.shape[:-1], _I64)
    for w in reversed(range(len(out))):
        acc = jnp.remainder((acc << word_bits) + out[w], q)
    return acc


# ----------------------------------------------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------------------------------------------


def _product(a, a_neg, b, b_neg, tables, sp: StaticPlan):
    require_x64()
    q, half = tables["q"], tables["half"]
    if sp.mode == "digits":
        fs = sp.families[0]
        tabs = jax.tree_util.tree_map(lambda v: v[0], tables["families"][0])
        return family_products(a, a_neg, b, b_neg, tabs, sp, fs, q, half)[0]
    shape = a.shape[:3]
    carry = (jnp.zeros(shape + (sp.words,), _F64), jnp.zeros(shape, _F64))
    for fs, ftabs in zip(sp.families, tables["families"]):
        def step(c, tabs, fs=fs):
            r = family_products(a, a_neg, b, b_neg, tabs, sp, fs, q, half)
            return crt_accumulate(c, r, tabs["inv"], tabs["mu"], tabs["W"], tabs["invm"]), None

        if fs.steps == 1:
            carry, _ = step(carry, jax.tree_util.tree_map(lambda v: v[0], ftabs))
        else:
            carry, _ = lax.scan(step, carry, ftabs)
    return crt_finish(carry, tables["walpha"], q, sp.word_bits, sp.finish)


run = jax.jit(_product, static_argnames="sp")
run.__doc__ = """Jitted matmul-method product: ``run(a, a_neg, b, b_neg, tables, sp=static_plan)``."""
