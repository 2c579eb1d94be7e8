"""Plans: everything about a product that is decided on the host before the device runs.

A :class:`PolyMulPlan` fixes, for a ring ``Z_q[x]/(x^n - sign)``, a batch geometry and the options:

* the residue base (:mod:`hemx.polymul.base`): digits of q or small CRT moduli, grouped in families by digit
  count;
* the Karatsuba depth ``L`` (paper §4): the Toeplitz matrix-vector product of size ``n`` becomes ``3^L``
  products of size ``n / 2^L`` whose operands are sums/differences taken mod each channel modulus, so the
  int8 operand range never grows;
* the blocking of each leaf product (paper §2.5): a leaf of size ``h`` is cut into ``N_b = h / t`` blocks of
  ``t`` coefficients; block row ``J`` of the result is ``sum_D x_(J-D) @ T_D`` where the ``t x t`` Toeplitz
  blocks ``T_D`` are cut from b. Stacking the ``N_b`` shifted copies of x as rows turns the product into one
  ``(rows * N_b, n) @ (n, t)`` matmul per channel instead of ``(rows, n) @ (n, n)``: a real matrix product
  even for one polynomial, and ``n * (N_b + t)`` bytes materialized instead of ``n^2``;
* the chunking of the contraction (blocks per chunk, so that int8 partial sums stay below the int32 bound
  and the gathered tiles stay cache-sized) and the number of moduli handled per step (memory);
* the CRT finish: on the device for ``q < 2^62`` (exact int64 Horner steps), on the host with Python ints
  above.

Plans are immutable and cached (:func:`make_plan`); :class:`StaticPlan` is the hashable structural part the
JAX function is compiled for, so moduli of the same shape (random q of the same size) reuse one compilation.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import numpy as np

from hemx.errors import OverflowBoundError, ParameterError
from hemx.polymul import base as base_mod

#: accumulator limits per engine: int8 x int8 -> int32, and float32 (exact integers below 2^24)
ENGINES: dict[str, int] = {"int8": (1 << 31) - 1, "float32": 1 << 24}
RINGS: dict[str, int] = {"negacyclic": -1, "cyclic": 1}
MAX_N = 1 << 22
MAX_KARATSUBA = 8
#: bytes of gathered int8 tiles per contraction chunk, all problems of a step together
CHUNK_BYTES = 32 << 20
#: bytes of gathered int8 tiles over a whole step (all its chunks): more moduli per step amortize the step's
#: fixed costs, fewer bound the working set
LEAF_STEP_BYTES = 32 << 20
#: bytes of residue / result arrays per step over the moduli
STEP_BYTES = 96 << 20


@dataclasses.dataclass(frozen=True)
class LeafGeometry:
    """How one leaf Toeplitz product of size ``h`` is blocked.

    Attributes:
        h: leaf size (``n / 2^L``).
        block: ``t``, the Toeplitz block size (divides ``h``).
        nblocks: ``N_b = h / t``, block rows of the result.
        ndiag: block diagonals ``D`` summed: ``N_b`` for the (anti)circulant top level, ``2 N_b - 1`` for a plain
            Toeplitz leaf (after Karatsuba).
        chunk: block diagonals per contraction chunk.
        nchunks: number of chunks (``chunk * nchunks >= ndiag``; the excess is zero padding).
        wrap: True for the top level without Karatsuba (the block rows wrap around with the ring's sign).
    """

    h: int
    block: int
    nblocks: int
    ndiag: int
    chunk: int
    nchunks: int
    wrap: bool


@dataclasses.dataclass(frozen=True)
class FamilySchedule:
    """Static schedule of one family of moduli: ``count`` moduli of ``digits`` digits, ``group`` per step."""

    digits: int
    count: int
    group: int
    steps: int
    leaf: LeafGeometry


@dataclasses.dataclass(frozen=True)
class StaticPlan:
    """The structural (compile-time) part of a plan; equal for every q of the same shape class."""

    n: int
    sign: int
    karatsuba: int
    engine: str
    input_kind: str  # "int64" or "bytes"
    input_bytes: int
    mode: str  # "digits" or "rns"
    finish: str  # "direct", "device" or "host"
    word_bits: int
    words: int
    families: tuple[FamilySchedule, ...]


@dataclasses.dataclass(frozen=True)
class PolyMulPlan:
    """A complete host-side plan for ``(batch_b, rows, n) x (batch_b, n)`` products mod q.

    Attributes:
        q: the modulus.
        ring: ``"negacyclic"`` (``x^n + 1``) or ``"cyclic"`` (``x^n - 1``).
        rows: products sharing one b (rows of the matmul before blocking).
        batch_b: distinct b polynomials.
        base: the residue base.
        static: the compiled structure.
    """

    q: int
    ring: str
    rows: int
    batch_b: int
    base: base_mod.Base
    static: StaticPlan

    @property
    def n(self) -> int:
        return self.static.n

    @property
    def channels(self) -> int:
        """int8 Toeplitz products per polynomial product (before Karatsuba savings)."""
        return self.base.channels

    @property
    def macs(self) -> int:
        """Multiply-accumulates the matrix engine performs for the whole batch (padding included)."""
        total = 0
        for f in self.static.families:
            g = f.leaf
            per_leaf = self.rows * g.nblocks * (g.chunk * g.nchunks * g.block) * g.block
            total += f.count * f.digits**2 * 3**self.static.karatsuba * per_leaf * self.batch_b
        return total

    def describe(self) -> str:
        s = self.static
        leaf = s.families[0].leaf
        return (
            f"n={s.n} {self.ring} q~2^{self.q.bit_length()} {self.base.describe()} engine={s.engine} "
            f"karatsuba={s.karatsuba} block={leaf.block} (N_b={leaf.nblocks}) chunk={leaf.chunk}x{leaf.nchunks} "
            f"finish={s.finish}"
        )


def _divisors(h: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(h) + 1) if h % d == 0]
    return sorted(set(small + [h // d for d in small]))


#: matmul multiply-adds worth one byte of tile building in the block-size cost model (CPU here: an int8 matmul
#: sustains a few hundred G MAC/s while building tiles runs at a few GB/s)
MACS_PER_TILE_BYTE = 150


def choose_block(h: int, rows: int, max_block: int | None = None, plain: bool = False) -> int:
    """Block size ``t`` (a divisor of ``h``) for a leaf of size ``h`` with ``rows`` products sharing b.

    Cost model per channel, with ``N_b = h / t`` blocks: the matmul does ``rows * h^2`` multiply-adds and the
    tiles take ``rows * h * N_b + h * t`` bytes (shifted copies of x, Toeplitz blocks of b). A plain Toeplitz leaf
    (after Karatsuba) has ``2 N_b - 1`` block diagonals instead of ``N_b``, so both terms grow by
    ``(2 N_b - 1) / N_b``. The block minimizing ``macs / MACS_PER_TILE_BYTE + bytes`` is taken, among blocks of
    at least 16 coefficients where ``h`` allows and at most ``max_block`` (one block's partial sums must fit the
    accumulator). For the wrapped top level this is ``N_b ~ sqrt(h / rows)``: one polynomial still becomes a
    matrix-matrix product of ``N_b`` rows.
    """
    best = None
    cands = [nb for nb in _divisors(h) if max_block is None or h // nb <= max_block]
    wide = [nb for nb in cands if h // nb >= min(16, h)]
    for nb in wide or cands:
        t = h // nb
        waste = (2 * nb - 1) / nb if plain else 1.0
        cost = waste * (rows * h * h / MACS_PER_TILE_BYTE + rows * h * nb + h * t)
        if best is None or cost < best[0] * (1 - 1e-9):
            best = (cost, t)
    return best[1]


def choose_chunk(ndiag: int, per_diag: int, max_acc: int) -> tuple[int, int]:
    """(block diagonals per chunk, chunks): at most :data:`CHUNK_BYTES` of tiles per chunk, within the accumulator.

    Few large chunks are best: the tiles are built by doubling (see :func:`hemx.polymul.kernel.hankel_rows`),
    whose overhead shrinks as the chunk grows. A chunk size that divides the diagonal count is preferred (no
    padding, which a wrapping leaf must mask).
    """
    dc = max(1, min(ndiag, CHUNK_BYTES // max(per_diag, 1), max_acc))
    exact = max(d for d in range(1, dc + 1) if ndiag % d == 0)
    if 2 * exact >= dc:
        return exact, ndiag // exact
    nch = -(-ndiag // dc)
    return -(-ndiag // nch), nch


def _words(q: int, ybits: int, nmod: int, finish: str) -> tuple[int, int]:
    """Word width c and count for the CRT sums ``S = sum y_i w_i`` (exact in float64, Horner-safe in int64)."""
    lg = math.ceil(math.log2(nmod + 2))
    c = min(16, 52 - ybits - lg)
    if finish == "device":
        c = min(c, 63 - q.bit_length())
    if c < 1:  # pragma: no cover - needs thousands of moduli
        raise OverflowBoundError("too many CRT moduli for exact float64 sums")
    sbits = q.bit_length() + ybits + lg + 1
    return c, -(-sbits // c) + 1


def crt_layout(q: int, moduli: tuple[int, ...], finish: str) -> tuple[int, int]:
    """(word bits, words) of the CRT accumulation for residues below ``max(moduli)``."""
    ybits = max(int(m) for m in moduli).bit_length()
    return _words(q, ybits, len(moduli), finish)


def input_layout(q: int) -> tuple[str, int]:
    """``("int64", 0)`` when coefficients fit int64 (``q <= 2^63``), else ``("bytes", nbytes)`` of ``q // 2``."""
    if q.bit_length() <= 63:
        return "int64", 0
    return "bytes", ((q // 2).bit_length() + 7) // 8


@functools.lru_cache(maxsize=256)
def make_plan(
    n: int,
    q: int,
    ring: str = "negacyclic",
    *,
    rows: int = 1,
    batch_b: int = 1,
    base: str = "auto",
    karatsuba: int = 0,
    block: int | None = None,
    chunk_blocks: int | None = None,
    engine: str = "int8",
) -> PolyMulPlan:
    """Plan products of ``batch_b`` b polynomials, each by ``rows`` a polynomials, of degree < ``n`` mod ``q``.

    Args:
        n: ring degree (any ``1 <= n <= 2^22``; a multiple of ``2^karatsuba``).
        q: modulus ``>= 2``.
        ring: ``"negacyclic"`` or ``"cyclic"``.
        rows: a polynomials per b (matmul rows).
        batch_b: distinct b polynomials.
        base: ``"auto"``, ``"digits"`` or ``"rns"`` (see :func:`hemx.polymul.base.choose_base`).
        karatsuba: Karatsuba levels L (0 = plain blocked product).
        block: leaf block size ``t`` (a divisor of ``n / 2^L``); default from :func:`choose_block`.
        chunk_blocks: block diagonals per contraction chunk; default from the cache / int32 budget.
        engine: ``"int8"`` (int8 x int8 -> int32) or ``"float32"`` (exact below 2^24).
    Raises:
        ParameterError for unsupported combinations; OverflowBoundError if a forced chunk overflows.
    """
    if ring not in RINGS:
        raise ParameterError(f"ring must be one of {tuple(RINGS)}, got {ring!r}")
    if engine not in ENGINES:
        raise ParameterError(f"engine must be one of {tuple(ENGINES)}, got {engine!r}")
    n, q, rows, batch_b = int(n), int(q), int(rows), int(batch_b)
    if not 1 <= n <= MAX_N:
        raise ParameterError(f"ring degree n must be in [1, 2^22], got {n}")
    if q < 2:
        raise ParameterError(f"modulus q must be at least 2, got {q}")
    if rows < 1 or batch_b < 1:
        raise ParameterError("rows and batch_b must be positive")
    if not isinstance(karatsuba, (int, np.integer)) or not 0 <= karatsuba <= MAX_KARATSUBA:
        raise ParameterError(f"karatsuba must be an integer level in [0, {MAX_KARATSUBA}], got {karatsuba!r}")
    karatsuba = int(karatsuba)
    if n % (1 << karatsuba):
        raise ParameterError(
            f"karatsuba={karatsuba} halves n {karatsuba} times, so n must be a multiple of {1 << karatsuba}; "
            f"n = {n} is not (use fewer levels)"
        )
    bs = base_mod.choose_base(n, q, base)
    h = n >> karatsuba
    wrap = karatsuba == 0
    limit = ENGINES[engine]
    max_block = min(limit // (f.digits * f.max_digit**2) for f in bs.families)
    if block is None:
        t = choose_block(h, rows, max_block, plain=not wrap)
    else:
        t = int(block)
        if t < 1 or h % t:
            raise ParameterError(f"block must divide the leaf size n / 2^karatsuba = {h}, got {block}")
    nb = h // t
    ndiag = nb if wrap else 2 * nb - 1
    leaves = 3**karatsuba
    scheds = []
    for fam in bs.families:
        k = fam.digits
        d = fam.max_digit
        # moduli per step: residues (int64) of a, b, the Karatsuba expansion and the merged result
        per_group = 8 * batch_b * (rows + 2) * n * (1.5**karatsuba) * (4 + k)
        per_diag1 = leaves * batch_b * k * (rows * h + k * t * t)  # one modulus, one block diagonal
        group = min(len(fam.moduli), STEP_BYTES // max(per_group, 1), LEAF_STEP_BYTES // max(per_diag1 * ndiag, 1))
        group = int(max(1, group))
        steps = -(-len(fam.moduli) // group)
        group = -(-len(fam.moduli) // steps)  # balance the steps
        per_diag = group * per_diag1
        max_chunk_acc = limit // (k * t * d * d)
        if max_chunk_acc < 1:
            raise OverflowBoundError(
                f"one {t}x{t} block already overflows the {engine} accumulator; use a smaller block"
            )
        if chunk_blocks is None:
            dc, nch = choose_chunk(ndiag, per_diag, max_chunk_acc)
        else:
            dc = int(chunk_blocks)
            if dc < 1:
                raise ParameterError(f"chunk_blocks must be positive, got {chunk_blocks}")
            base_mod.check_accumulation(fam, k * dc * t, limit)
            dc = min(dc, ndiag)
            nch = -(-ndiag // dc)
        scheds.append(FamilySchedule(k, len(fam.moduli), group, steps, LeafGeometry(h, t, nb, ndiag, dc, nch, wrap)))
    kind, nbytes = input_layout(q)
    if bs.mode == "digits":
        finish, c, words = "direct", 0, 0
    else:
        finish = "device" if q.bit_length() <= 62 else "host"
        c, words = crt_layout(q, bs.moduli, finish)
    static = StaticPlan(
        n, RINGS[ring], karatsuba, engine, kind, nbytes, bs.mode, finish, c, words, tuple(scheds)
    )
    return PolyMulPlan(q, ring, rows, batch_b, bs, static)


def _words_of(value: int, c: int, count: int) -> list[int]:
    mask = (1 << c) - 1
    return [(value >> (c * w)) & mask for w in range(count)]


@functools.lru_cache(maxsize=64)
def plan_tables(plan: PolyMulPlan) -> dict:
    """Device-resident constants of a plan (a pytree of jax arrays; built once per plan).

    Per family (moduli padded with ``m = 1`` to ``steps * group``): ``mu`` int64 moduli, ``fold`` int64
    ``2^(8i) mod m`` (``i < K``), ``wts`` float64 ``2^(8w) mod m`` for byte inputs, and for the CRT ``inv``
    (``(M/m)^-1 mod m``), ``W`` (float64 words of ``(M/m) mod q``), ``invm`` (``1/m``). Global: ``q`` and
    ``half`` (int64, zero when q needs more than 63 bits) and ``walpha`` (int64 words of ``-M mod q``); ``minv``
    (float64 ``1/m``) and ``c32`` (``2^32 mod m``) serve the division-free reductions of the RNS moduli.
    """
    s = plan.static
    q = plan.q
    c, words = s.word_bits, s.words
    if s.mode == "rns":
        invs, ws, walpha = base_mod.crt_constants(plan.base.moduli, q)
    else:
        invs, ws, walpha = [0], [0], 0
    fams = []
    pos = 0
    for sched, fam in zip(s.families, plan.base.families):
        total = sched.group * sched.steps
        mods = list(fam.moduli) + [1] * (total - len(fam.moduli))
        fam_inv = invs[pos : pos + len(fam.moduli)] + [0] * (total - len(fam.moduli))
        fam_w = ws[pos : pos + len(fam.moduli)] + [0] * (total - len(fam.moduli))
        pos += len(fam.moduli)
        mu = np.asarray(mods, dtype=np.int64)
        fold = np.asarray([[pow(2, 8 * i, m) for i in range(sched.digits)] for m in mods], dtype=np.int64)
        nbyt = max(s.input_bytes, 1)
        wts = np.asarray([[pow(2, 8 * w, m) for w in range(nbyt)] for m in mods], dtype=np.float64)
        if s.mode == "rns":
            wmat = np.asarray([_words_of(w, c, words) for w in fam_w], dtype=np.float64)
            invm = np.asarray([1.0 / m if i < len(fam.moduli) else 0.0 for i, m in enumerate(mods)])
        else:
            wmat = np.zeros((total, 1))
            invm = np.zeros(total)
        fams.append(
            {
                "mu": mu.reshape(sched.steps, sched.group),
                "fold": fold.reshape(sched.steps, sched.group, -1),
                "wts": wts.reshape(sched.steps, sched.group, -1),
                "inv": np.asarray(fam_inv, dtype=np.int64).reshape(sched.steps, sched.group),
                "W": wmat.reshape(sched.steps, sched.group, -1),
                "invm": invm.reshape(sched.steps, sched.group),
                "minv": (1.0 / mu.astype(np.float64)).reshape(sched.steps, sched.group),
                "c32": np.asarray([(1 << 32) % m for m in mods], dtype=np.int64).reshape(sched.steps, sched.group),
            }
        )
    small = q.bit_length() <= 63
    tables = {
        "families": fams,
        "q": np.asarray(q if small else 0, dtype=np.int64),
        "half": np.asarray(q // 2 if small else 0, dtype=np.int64),
        "walpha": np.asarray(_words_of(walpha, c, words) if words else [0], dtype=np.int64),
    }
    return jax.device_put(tables)
