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


def mod_small(x, m, minv):
    """``x mod m`` in ``[0, m)`` for int64 ``|x| < 2^40``, ``m <= 2^16``, ``minv = 1/m`` (float64), no division.

    The float64 quotient ``floor(x * minv)`` is off by at most one (relative error below 2^-51, so the absolute
    error is below 2^-11), which one conditional add or subtract repairs. With ``minv=None`` this is
    ``jnp.remainder`` (an integer division; used for moduli above 2^16).
    """
    if minv is None:
        return jnp.remainder(x, m)
    r = x - jnp.floor(x.astype(_F64) * minv).astype(_I64) * m
    r = jnp.where(r < 0, r + m, r)
    return jnp.where(r >= m, r - m, r)


def add_mod(a, b, m):
    """``a + b mod m`` for ``a, b`` in ``[0, m)``."""
    s = a + b
    return jnp.where(s >= m, s - m, s)


def sub_mod(a, b, m):
    """``a - b mod m`` for ``a, b`` in ``[0, m)``."""
    d = a - b
    return jnp.where(d < 0, d + m, d)


def neg_mod(a, m):
    """``-a mod m`` for ``a`` in ``[0, m)``."""
    return jnp.where(a == 0, a, m - a)


def residues(x, sign_mask, kind: str, mu, wts, q, half, minv=None, c32=None):
    """Residues of the centered coefficients modulo each ``mu``.

    Args:
        x: int64 ``(*S)`` coefficients in ``[0, q)`` (``kind="int64"``) or uint8 ``(*S, nbytes)`` magnitudes of
            the centered coefficients (``kind="bytes"``).
        sign_mask: bool ``(*S)``, True where the centered coefficient is negative (bytes only; else ignored).
        mu: int64 ``(G,)`` moduli; wts: float64 ``(G, nbytes)`` ``2^(8w) mod mu``; q, half: int64 scalars.
        minv, c32: float64 ``1/mu`` and int64 ``2^32 mod mu`` for the division-free path (moduli <= 2^16);
            ``None`` for integer division.
    Returns:
        int64 ``(G, *S)`` in ``[0, mu)``.
    """
    if kind == "int64":
        xc = jnp.where(x > half, x - q, x)[None]
        m = _bcast(mu, xc.ndim)
        if minv is None:
            return jnp.remainder(xc, m)
        inv = _bcast(minv, xc.ndim)
        hi, lo = xc >> 32, xc & 0xFFFFFFFF  # xc = hi 2^32 + lo, |hi| < 2^31, 0 <= lo < 2^32
        return mod_small(mod_small(hi, m, inv) * _bcast(c32, xc.ndim) + lo, m, inv)
    # bytes * (2^(8w) mod m) summed over w < 96 stays below 2^31: exact in float64
    v = jnp.tensordot(wts, x.astype(_F64), axes=([1], [x.ndim - 1]))
    m = _bcast(mu, v.ndim)
    r = mod_small(v.astype(_I64), m, None if minv is None else _bcast(minv, v.ndim))
    return jnp.where(sign_mask[None], neg_mod(r, m), r)


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
    xs = jnp.stack([add_mod(x0, x1, m5), x1, x0], axis=2)
    t_m1, t_0, t_1 = tau[..., : 2 * h - 1], tau[..., h : 3 * h - 1], tau[..., 2 * h :]
    ts = jnp.stack([t_0, sub_mod(t_m1, t_0, m4), sub_mod(t_1, t_0, m4)], axis=2)
    g, f = x.shape[:2]
    return xs.reshape((g, 3 * f) + xs.shape[3:]), ts.reshape((g, 3 * f) + ts.shape[3:])


def karatsuba_join(y, mu):
    """Inverse bookkeeping of :func:`karatsuba_split`: ``(G, 3F, Bb, R, h)`` -> ``(G, F, Bb, R, 2h)``."""
    g, f3 = y.shape[:2]
    y = y.reshape((g, f3 // 3, 3) + y.shape[2:])
    m = _bcast(mu, 5)
    p, q0, q1 = y[:, :, 0], y[:, :, 1], y[:, :, 2]
    return jnp.concatenate([add_mod(p, q0, m), add_mod(p, q1, m)], axis=-1)


# ----------------------------------------------------------------------------------------------------------
# leaf: blocked Toeplitz product as int8 matmuls (paper §2.2 + §2.5)
# ----------------------------------------------------------------------------------------------------------


def hankel_rows(w, nrows: int, stride: int, length: int):
    """Rows ``w[..., j * stride : j * stride + length]`` for ``j < nrows``, stacked on a new axis -2.

    Built by doubling (``log2(nrows)`` slice-and-concatenate steps: rows ``m..2m-1`` are rows ``0..m-1`` shifted
    by ``m * stride``) instead of ``nrows`` separate slices, which keeps the program small; ``w`` is zero-padded
    so every step is in range.
    """
    rows_p2 = 1 << max(0, (nrows - 1).bit_length())
    span = (rows_p2 - 1) * stride + length
    g = jnp.pad(w[..., :span], [(0, 0)] * (w.ndim - 1) + [(0, max(0, span - w.shape[-1]))])[..., None, :]
    m = 1
    while m < rows_p2:
        keep = g.shape[-1] - m * stride
        g = jnp.concatenate([g[..., :keep], g[..., m * stride :]], axis=-2)
        m *= 2
    return g[..., :nrows, :length]


def leaf_product(x, tau, mu, fold, geo: LeafGeometry, k: int, sign: int, engine: str, minv=None):
    """``y = x @ Toeplitz(tau) mod mu`` for every problem, through int8 matmuls of the balanced digits.

    Args:
        x: int64 ``(P, Bb, R, h)`` residues; tau: int64 ``(P, Bb, 2h - 1)`` residues (see module docstring).
        mu: int64 ``(P,)`` moduli; fold: int64 ``(P, k)`` with ``2^(8i) mod mu``.
        geo: blocking; k: digits per residue; sign: the ring sign used when ``geo.wrap``.
        engine: "int8" or "float32".
        minv: float64 ``(P,)`` ``1/mu`` for division-free reductions (moduli <= 2^16), or None.
    Returns:
        int64 ``(P, Bb, R, h)`` in ``[0, mu)``.

    Block formulation (paper §2.5 with both operands structured): with ``t = geo.block`` and ``N_b = h / t``,
    block row ``J`` of ``y`` is ``sum_D' X[J + D'] @ B[D']``. ``X`` lists the blocks of x, preceded by the
    sign-flipped copy when the matrix wraps around (top level: ``x^n = sign``) or by zero blocks for a plain
    Toeplitz leaf (after Karatsuba); ``B[D'][u, v'] = rho[D' t + u + v']`` is a Hankel block of the reversed
    ``tau`` (output columns come out reversed, ``v' = t - 1 - v``). Per chunk of ``D'`` both matmul operands are
    built on the device from O(h) data: every row of ``A[(R, J), (i, D', u)]`` is one contiguous run of x's
    blocks (start ``J t``) and every row of ``B^T[(o, v'), (i, D', u)]`` one contiguous run of ``rho`` (start
    ``v'``), so both are :func:`hankel_rows` of a window, in the layout the int8 matmul reads directly (measured
    several times faster on CPU than element gathers). Chunks past the last diagonal are zero padding: harmless
    for plain leaves (they meet the zero blocks of ``X``), masked out of ``B`` when wrapping.

    Digits: ``x = sum_i 2^(8i) x_i`` and for b the BAT fold ``tau_i = 2^(8i) tau mod mu = sum_o 2^(8o) d_io``, so
    ``y = sum_o 2^(8o) sum_i x_i @ T(d_io) (mod mu)``: one contraction over ``(i, D', u)`` per output digit o.
    """
    p, bb, r, h = x.shape
    t, nb, ndiag, dc, nch = geo.block, geo.nblocks, geo.ndiag, geo.chunk, geo.nchunks
    npad = dc * nch
    m4 = _bcast(mu, 4)

    def blocks(v):  # (P, Bb, R, h) residues -> (P, Bb, R, k, N_b, t) digits
        d = digits(v, m4, k).reshape(p, bb, r, nb, t, k)
        return jnp.transpose(d, (0, 1, 2, 5, 3, 4))

    xd = blocks(x)
    if geo.wrap:
        low = xd if sign == 1 else blocks(neg_mod(x, m4))
        xe = jnp.concatenate([low, xd], axis=4)[:, :, :, :, 1:]
    else:
        z = jnp.zeros(xd.shape[:4] + (nb - 1, t), jnp.int8)
        xe = jnp.concatenate([z, xd, z], axis=4)
    lx = nb + npad - 1
    xe = jnp.pad(xe, [(0, 0)] * 4 + [(0, lx - xe.shape[4]), (0, 0)]).reshape(p, bb, r, k, lx * t)

    inv4 = None if minv is None else _bcast(minv, 4)
    if k == 1:
        tf = tau[:, :, None, :]  # fold = 2^0 = 1
    else:
        tf = mod_small(tau[:, :, None, :] * fold[:, None, :, None], m4, inv4)  # (P, Bb, k_i, 2h - 1)
    rho = tf[..., ::-1][..., : ndiag * t + t - 1]
    rd = jnp.moveaxis(digits(rho, _bcast(mu, 4), k), -1, 3)  # (P, Bb, k_i, k_o, L)
    rd = jnp.pad(rd, [(0, 0)] * 4 + [(0, (npad + 1) * t - rd.shape[-1])])
    acc_dtype = jnp.int32 if engine == "int8" else jnp.float32
    span = dc * t

    def chunk(c):
        # A[(R, J), (i, D', u)] = X[J + c dc + D'][u]: row J is one contiguous run of dc blocks
        wx = lax.dynamic_slice_in_dim(xe, c * span, (nb + dc - 1) * t, axis=-1)
        a_t = jnp.moveaxis(hankel_rows(wx, nb, t, span), -2, 3)  # (P, Bb, R, N_b, k, span)
        a_t = a_t.reshape(p, bb, r * nb, k * span)
        # B^T[(o, v'), (i, D', u)] = rho_io[(c dc + D') t + u + v']: row v' is one contiguous run per digit i
        wr = lax.dynamic_slice_in_dim(rd, c * span, span + t, axis=-1)  # (P, Bb, k_i, k_o, span + t)
        b_t = hankel_rows(wr, t, 1, span)  # (P, Bb, k_i, k_o, t, span)
        b_t = jnp.moveaxis(b_t, 2, 4)  # (P, Bb, k_o, t, k_i, span)
        if geo.wrap and npad > ndiag:
            # padded diagonals D' >= N_b would wrap onto real blocks of x: zero their columns of B^T
            keep = (c * dc + jnp.arange(dc)) < ndiag
            b_t = jnp.where(keep[:, None], b_t.reshape(p, bb, k, t, k, dc, t), 0)
        b_t = b_t.reshape(p, bb, k * t, k * span)
        if engine == "float32":
            a_t, b_t = a_t.astype(jnp.float32), b_t.astype(jnp.float32)
        out = jnp.einsum("pbmc,pbnc->pbmn", a_t, b_t, preferred_element_type=acc_dtype)
        return out.astype(_I64)

    if nch == 1:
        zsum = chunk(jnp.zeros((), jnp.int32))
    else:
        def body(acc, c):
            return acc + chunk(c), None

        zsum, _ = lax.scan(body, jnp.zeros((p, bb, r * nb, k * t), _I64), jnp.arange(nch, dtype=jnp.int32))
    zsum = zsum.reshape(p, bb, r, nb, k, t)[..., ::-1]
    zsum = jnp.transpose(zsum, (0, 1, 4, 2, 3, 5)).reshape(p, bb, k, r, h)
    # |z| <= (total contraction k * 2h) * 128^2 <= 2^38 for n <= 2^22: within mod_small's range
    y = mod_small(zsum[:, :, 0], m4, inv4)
    for o in range(1, k):
        y = add_mod(y, mod_small(mod_small(zsum[:, :, o], m4, inv4) * _bcast(fold[:, o], 4), m4, inv4), m4)
    return y


# ----------------------------------------------------------------------------------------------------------
# one family of moduli: residues -> Karatsuba -> leaves -> merged residues of the product
# ----------------------------------------------------------------------------------------------------------


def family_products(a, a_neg, b, b_neg, tabs, sp: StaticPlan, fs: FamilySchedule, q, half):
    """Residues of the exact product modulo a group of moduli.

    Args:
        a, a_neg, b, b_neg: kernel inputs (see module docstring); tabs: this step's family tables (``mu`` (G,),
            ``fold`` (G, K), ``wts`` (G, nbytes), ``minv`` (G,), ``c32`` (G,)); q, half: int64 scalars.
    Returns:
        int64 ``(G, Bb, R, n)`` in ``[0, mu)``.
    """
    mu = tabs["mu"]
    minv = tabs["minv"] if sp.mode == "rns" else None  # RNS moduli are <= 65279: division-free reductions
    c32 = tabs["c32"]
    ra = residues(a, a_neg, sp.input_kind, mu, tabs["wts"], q, half, minv, c32)  # (G, Bb, R, n)
    rb = residues(b, b_neg, sp.input_kind, mu, tabs["wts"], q, half, minv, c32)  # (G, Bb, n)
    m3 = _bcast(mu, 3)
    low = rb[..., 1:] if sp.sign == 1 else neg_mod(rb[..., 1:], m3)
    tau = jnp.concatenate([low, rb], axis=-1)[:, None]  # (G, 1, Bb, 2n - 1)
    x = ra[:, None]  # (G, 1, Bb, R, n)
    for _ in range(sp.karatsuba):
        x, tau = karatsuba_split(x, tau, mu)
    g, f = x.shape[:2]
    xf = x.reshape((g * f,) + x.shape[2:])
    tf = tau.reshape((g * f,) + tau.shape[2:])
    mu_f = jnp.repeat(mu, f)
    fold_f = jnp.repeat(tabs["fold"], f, axis=0)
    minv_f = None if minv is None else jnp.repeat(minv, f)
    y = leaf_product(xf, tf, mu_f, fold_f, fs.leaf, fs.digits, sp.sign, sp.engine, minv_f)
    y = y.reshape((g, f) + y.shape[1:])
    for _ in range(sp.karatsuba):
        y = karatsuba_join(y, mu)
    return y[:, 0]


# ----------------------------------------------------------------------------------------------------------
# CRT to mod q (exact): float64 word sums, int64 carries, Horner steps
# ----------------------------------------------------------------------------------------------------------


def crt_accumulate(carry, r, inv, mu, wmat, invm, minv=None):
    """Add one group's CRT terms: ``S += y @ W`` and ``F += y / m`` with ``y = r * inv mod m``.

    ``carry = (S, F)``: float64 ``(*S, words)`` and ``(*S)``; ``r`` int64 ``(G, *S)``; ``wmat`` ``(G, words)``.
    Every partial sum is an integer below 2^53 (word width chosen by the plan), so the float64 sums are exact.
    """
    s, f = carry
    m = _bcast(mu, r.ndim)
    y = mod_small(r * _bcast(inv, r.ndim), m, None if minv is None else _bcast(minv, r.ndim)).astype(_F64)
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
            return crt_accumulate(c, r, tabs["inv"], tabs["mu"], tabs["W"], tabs["invm"], tabs["minv"]), None

        if fs.steps == 1:
            carry, _ = step(carry, jax.tree_util.tree_map(lambda v: v[0], ftabs))
        else:
            carry, _ = lax.scan(step, carry, ftabs)
    return crt_finish(carry, tables["walpha"], q, sp.word_bits, sp.finish)


run = jax.jit(_product, static_argnames="sp")
run.__doc__ = """Jitted matmul-method product: ``run(a, a_neg, b, b_neg, tables, sp=static_plan)``."""
