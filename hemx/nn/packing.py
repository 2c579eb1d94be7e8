"""Slot layouts of network tensors and the packed evaluation of every linear layer on an :class:`Evaluator`.

Layout (:class:`Layout`, :func:`image_layout`): "channel blocks on a fixed grid, with gaps" (the gapped layout of
Lee et al., ICML'22, without their multiplexing). The input image ``(C, H, W)`` is placed on a grid of
``Hg x Wg`` slots (powers of two, ``Hg >= H``, ``Wg >= W``): channel ``c`` occupies the block of ``P = Hg Wg``
slots starting at ``c P``, pixel ``(y, x)`` the slot ``c P + g y Wg + g x`` with the *gap* ``g = 1``. A ciphertext
holds ``slots / P`` channel blocks; a tensor with more channels takes several ciphertexts, and a batch of images
is a leading batch axis of every ciphertext (each image in its own slot vector, so rotations never mix images).

Why: a convolution of stride 1 reads its input shifted by ``g (dy Wg + dx)`` (one rotation per kernel tap,
shared by every channel), and the channel mixing is a rotation by whole blocks; a stride-2 convolution writes its
output pixel ``(y, x)`` to the grid point of input pixel ``(2y, 2x)``, i.e. it doubles the gap instead of moving
data: no repacking transform and no extra level, at the price of unused slots (ResNet-20 at N = 2^16: 16 channels
of 32x32 fill half a ciphertext, 32 channels of 16x16 at gap 2 one ciphertext, 64 channels of 8x8 at gap 4 two).
Multiplexing the gaps (Lee et al.) would halve the last stage's ciphertexts at the cost of a more complex
permutation per stride-2 layer. Several images are not packed into one ciphertext: the channel mixing rotates by
whole blocks cyclically over the ciphertext, which would carry one image's channels into the next; images go on the
ciphertexts' batch axis instead, where every operation (and the bootstrap) is batched.

Costs per layer (``n_b`` channel blocks per ciphertext, ``T`` kernel taps): a conv needs the diagonals
``(b_in - b_out) P + tap shift`` that carry a weight: up to ``(C_in + C_out - 1) T`` plaintext products per pair of
ciphertexts, and ``babies + giants`` rotations with ``n1`` chosen per layer (ResNet-20 at N = 2^16: a 16 -> 16
3x3 conv on 32x32 takes 279 products and 32 rotations, 64 -> 64 on 8x8 at gap 4 in two ciphertexts 1152 and 64);
an average pool ``window^2`` products and ``window^2 - 1`` rotations; a dense layer the distinct
``position_in - position_out`` offsets (``F_in + F_out - 1`` when the inputs sit a block apart, after a global
pool); a global average pool one product and ``log2(H) + log2(W)`` rotations per ciphertext.

Linear layers (:class:`DiagonalMap`): a conv (any kernel, stride 1/2, padding, ``C_in != C_out``), an average
pool, a standalone batch norm and a dense layer are all sparse linear maps between two layouts. The map from
input ciphertext ``ji`` to output ciphertext ``jo`` is a sum of generalized diagonals
``y = sum_r d_r * rot(x, r)``; for a conv, ``r = (b_in - b_out) P + g (dy Wg + dx)`` (channel-block rotation
plus tap shift) and ``d_r`` holds the weight on the output pixels whose input pixel exists (padding masked). They
are evaluated baby-step/giant-step: ``r = giant + baby`` with ``n1`` a power of two chosen to minimize
``babies + ratio * giants`` over the whole layer; the baby rotations of every input ciphertext are hoisted (one
``rotate_many``) and shared by every output channel and output ciphertext, the inner sums over all input
ciphertexts are rescaled once per giant, then rotated. One level; the plaintext diagonals are encoded at the
input's level at the scale of that level's rescale, so every layer keeps its input's scale exactly (every tensor
of a network stays at the context's scale, so residual additions need no alignment beyond a level drop).

Encoding (:func:`encode_values`): each giant step's diagonals are encoded when the step runs, by the evaluator's
encoder (``Context.encode``: :func:`hemx.ckks.encoder.encode_ntt`), from the cached float64 diagonals or from the
layer's data given as an argument (:meth:`DiagonalMap.program_data`, ``CompiledNetwork.diagonals``): in a traced
program the data is then an argument and its encoding part of the program, and the two give the same plaintexts
bit for bit.

Every layout records whether the slots outside its positions are zero (``clean``); linear maps read only their
input's positions, so they accept unclean inputs and produce clean outputs.

Interleaved images (``compile(..., images_per_ciphertext=B)``, :func:`interleave`): for small images the layout
above fills a fraction of a ciphertext, and one image per slot vector wastes the rest. With ``B`` images per
ciphertext (a power of two) every layout is the one above on ``S / B`` slots, and slot ``s B + b`` of the
ciphertext holds slot ``s`` of image ``b``. A rotation by ``r B`` then rotates every image's ``S / B``-slot vector
by ``r`` cyclically, without mixing images, and a plaintext whose per-image slot values are repeated ``B`` times
(``np.repeat``) multiplies every image by the same diagonal: the single-image program on ``S / B`` slots, each
rotation ``r`` run as ``r B`` and each plaintext repeated (:class:`hemx.nn.run.InterleavedEvaluator`), evaluates
``B`` images at the cost of one. Depth, levels and bootstraps are those of the single-image program.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import LevelError, ParameterError, ShapeError
from hemx.nn.layers.base import batched

DEFAULT_BSGS_RATIO = 2.0  # cost of a giant rotation relative to a hoisted baby rotation
_CHUNK = 2048  # (out, in, tap) triples materialized at once when building a conv's diagonals


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


# ------------------------------------------------------------------------------------------------------------
# layouts
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Where every element of a tensor lives: ``positions[idx]`` = ``ct * slots + slot``.

    Attributes:
        shape: the tensor's shape, ``(C, H, W)`` or ``(F,)``.
        slots: slots per ciphertext.
        positions: int64 array of ``shape``: global slot index of every element.
        num_cts: ciphertexts of the tensor.
        grid: ``(Hg, Wg)`` of image layouts (None for vectors); ``gap`` the distance between adjacent pixels.
        clean: whether every slot that is not a position holds 0.
    """

    shape: tuple[int, ...]
    slots: int
    positions: np.ndarray
    num_cts: int
    grid: tuple[int, int] | None = None
    gap: int = 1
    clean: bool = True

    @property
    def block(self) -> int:
        """Slots per channel block (``Hg * Wg``) of an image layout."""
        if self.grid is None:
            raise ParameterError("a vector layout has no channel blocks")
        return self.grid[0] * self.grid[1]

    @property
    def blocks_per_ct(self) -> int:
        return self.slots // self.block

    def replace(self, **changes) -> "Layout":
        return dataclasses.replace(self, **changes)

    def same_positions(self, other: "Layout") -> bool:
        return (self.shape == other.shape and self.slots == other.slots and self.num_cts == other.num_cts
                and bool(np.array_equal(self.positions, other.positions)))

    def pack(self, x) -> np.ndarray:
        """Tensor values ``shape`` or ``(B, *shape)`` -> slot values ``(num_cts, slots)`` or ``(num_cts, B, slots)``."""
        x, single = batched(x, self.shape, "a layout of tensors")
        out = np.zeros((x.shape[0], self.num_cts * self.slots))
        out[:, self.positions.reshape(-1)] = x.reshape(x.shape[0], -1)
        out = out.reshape(x.shape[0], self.num_cts, self.slots).transpose(1, 0, 2)
        return out[:, 0] if single else out

    def unpack(self, values) -> np.ndarray:
        """Slot values ``(num_cts, slots)`` or ``(num_cts, B, slots)`` -> ``shape`` or ``(B, *shape)`` (real part)."""
        v = np.asarray(values)
        if np.iscomplexobj(v):
            v = v.real
        single = v.ndim == 2
        if single:
            v = v[:, None]
        if v.ndim != 3 or v.shape[0] != self.num_cts or v.shape[2] != self.slots:
            raise ShapeError(f"slot values must be (num_cts={self.num_cts}, [B,] slots={self.slots}), "
                             f"got {np.shape(values)}")
        flat = v.transpose(1, 0, 2).reshape(v.shape[1], -1)
        out = flat[:, self.positions.reshape(-1)].reshape((v.shape[1],) + self.shape)
        return out[0] if single else out

    def describe(self) -> str:
        if self.grid is None:
            return f"vector {self.shape[0]} in {self.num_cts} ct"
        return (f"{self.shape[0]}x{self.shape[1]}x{self.shape[2]} on {self.grid[0]}x{self.grid[1]} gap {self.gap}, "
                f"{self.blocks_per_ct} ch/ct, {self.num_cts} ct")


def _check_slots(slots) -> int:
    if isinstance(slots, bool) or not isinstance(slots, (int, np.integer)) or slots < 1 or slots & (slots - 1):
        raise ParameterError(f"slots must be a power of two, got {slots!r}")
    return int(slots)


def check_images(images, slots: int) -> int:
    """``images_per_ciphertext`` checked: a power of two from 1 to ``slots``."""
    if isinstance(images, bool) or not isinstance(images, (int, np.integer)) or images < 1 or images & (images - 1):
        raise ParameterError(f"images_per_ciphertext must be a power of two >= 1 (1: one image per ciphertext), "
                             f"got {images!r}")
    if images > slots:
        raise ParameterError(f"images_per_ciphertext={images} exceeds the {slots} slots of a ciphertext: use at most "
                             f"{slots} (each image gets slots / images_per_ciphertext slots)")
    return int(images)


def interleave(values, images: int) -> np.ndarray:
    """Per-image slot values -> interleaved ciphertext slot values (module docstring).

    ``values``: ``(num_cts, n, s)`` (``n`` images, each ``s`` slots per ciphertext) or ``(num_cts, s)`` (one image).
    Returns ``(num_cts, ceil(n / images), s * images)``: ciphertext batch entry ``m`` holds images
    ``m * images + b`` at slots ``t * images + b`` (images past ``n``: zeros); one image gives ``(num_cts,
    s * images)`` with the image at ``b = 0``."""
    v = np.asarray(values)
    single = v.ndim == 2
    if single:
        v = v[:, None]
    if v.ndim != 3:
        raise ShapeError(f"slot values must be (num_cts, [n,] slots), got {np.shape(values)}")
    num_cts, n, s = v.shape
    groups = -(-n // images)
    padded = np.zeros((num_cts, groups * images, s), v.dtype)
    padded[:, :n] = v
    out = padded.reshape(num_cts, groups, images, s).transpose(0, 1, 3, 2).reshape(num_cts, groups, s * images)
    return out[:, 0] if single else out


def deinterleave(values, images: int) -> np.ndarray:
    """Interleaved ciphertext slot values ``(num_cts, [m,] S)`` -> per-image slot values
    ``(num_cts, m * images, S / images)`` (``(num_cts, images, S / images)`` without the batch axis): the inverse
    of :func:`interleave`, every image slot of the ciphertexts included."""
    v = np.asarray(values)
    if v.ndim == 2:
        v = v[:, None]
    if v.ndim != 3 or v.shape[2] % images:
        raise ShapeError(f"slot values must be (num_cts, [m,] slots) with slots a multiple of {images}, "
                         f"got {np.shape(values)}")
    num_cts, m, slots = v.shape
    s = slots // images
    return v.reshape(num_cts, m, s, images).transpose(0, 1, 3, 2).reshape(num_cts, m * images, s)


def repeat_slots(values, images: int):
    """Per-image slot values ``(..., s)`` -> ``(..., s * images)``, each slot repeated ``images`` times: the
    interleaved plaintext that applies the same values to every image (numpy, or jax.numpy for traced values)."""
    if isinstance(values, jax.core.Tracer):
        return jnp.repeat(values, images, axis=-1)
    return np.repeat(np.asarray(values), images, axis=-1)


def image_layout(shape: Sequence[int], slots: int, *, grid: tuple[int, int] | None = None, gap: int = 1) -> Layout:
    """The channel-block layout of a ``(C, H, W)`` tensor (module docstring).

    ``grid``: ``(Hg, Wg)`` powers of two with ``g (H - 1) < Hg`` and ``g (W - 1) < Wg`` (default: the smallest
    powers of two >= ``g (H - 1) + 1``, ``g (W - 1) + 1``).
    """
    slots = _check_slots(slots)
    if len(shape) != 3 or min(shape) < 1:
        raise ShapeError(f"an image layout needs a (C, H, W) shape, got {tuple(shape)}")
    c, h, w = (int(s) for s in shape)
    if grid is None:
        grid = (_next_pow2(gap * (h - 1) + 1), _next_pow2(gap * (w - 1) + 1))
    hg, wg = (int(v) for v in grid)
    if hg & (hg - 1) or wg & (wg - 1) or gap * (h - 1) >= hg or gap * (w - 1) >= wg:
        raise ShapeError(f"grid {grid} cannot hold {h}x{w} pixels at gap {gap} (powers of two large enough)")
    block = hg * wg
    if block > slots:
        raise ParameterError(f"one channel of {hg}x{wg} grid slots does not fit in {slots} slots: use a context "
                             "with more slots (a larger ring) or smaller images")
    per_ct = slots // block
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    pos = (np.arange(c)[:, None, None] * block + gap * ys[None] * wg + gap * xs[None]).astype(np.int64)
    pos.setflags(write=False)
    return Layout((c, h, w), slots, pos, -(-c // per_ct), (hg, wg), int(gap), True)


def vector_layout(size: int, slots: int, *, stride: int = 1) -> Layout:
    """``(F,)`` with element ``f`` at global slot ``f * stride``."""
    slots = _check_slots(slots)
    pos = np.arange(int(size), dtype=np.int64) * int(stride)
    pos.setflags(write=False)
    return Layout((int(size),), slots, pos, int(pos[-1]) // slots + 1, None, 1, True)


# ------------------------------------------------------------------------------------------------------------
# diagonal maps: the linear layers
# ------------------------------------------------------------------------------------------------------------

Builder = Callable[[], dict]  # () -> {(jo, ji): {r: (slots,) float64 diagonal}}


class DiagonalMap:
    """A sparse linear map between two layouts as generalized diagonals, evaluated baby-step/giant-step.

    Args:
        in_layout, out_layout: the layouts of the input and the output.
        structure: ``{(jo, ji): sorted int array of r}``: the non-zero diagonals of each ciphertext pair.
        builder: a function returning the diagonal values ``{(jo, ji): {r: (slots,) array}}`` (called once, on the
            first evaluation: the plan needs the structure only).
        bias: ``(num_out_cts, slots)`` added after the product, or None.
        bsgs_ratio: cost of a giant rotation relative to a hoisted baby one.

    Attributes:
        n1: the baby-step count; ``babies[ji]`` / ``giants[jo]`` the steps used (0 included when used).
        rotations: every non-zero rotation step (for the Galois keys).
        key_switches: rotations executed per evaluation (babies of every input ct, giants of every output ct).
        plaintext_mults: plaintext products per evaluation (the non-zero diagonals).
        schedule: the evaluation order of :meth:`apply` (per output ciphertext, giant steps and their terms), which
            is also the row order of :meth:`program_rows`.
    """

    depth = 1

    def __init__(self, in_layout: Layout, out_layout: Layout, structure: dict, builder: Builder,
                 bias: np.ndarray | None = None, *, bsgs_ratio: float = DEFAULT_BSGS_RATIO):
        self.in_layout, self.out_layout = in_layout, out_layout
        self.slots = in_layout.slots
        self.structure = {k: np.asarray(v, dtype=np.int64) for k, v in structure.items() if len(v)}
        if not self.structure:
            raise ParameterError("the linear layer's weights are all zero: nothing to compute")
        self._builder = builder
        self._values: dict | None = None
        self.bias = bias
        self.n1 = self._choose_n1(float(bsgs_ratio))
        n1 = self.n1
        self.babies: dict[int, tuple[int, ...]] = {}
        self.giants: dict[int, tuple[int, ...]] = {}
        for (jo, ji), rs in self.structure.items():
            self.babies[ji] = tuple(sorted(set(self.babies.get(ji, ())) | {int(r) % n1 for r in rs}))
            self.giants[jo] = tuple(sorted(set(self.giants.get(jo, ())) | {int(r - r % n1) for r in rs}))
        steps = {s for v in self.babies.values() for s in v} | {s for v in self.giants.values() for s in v}
        self.rotations = tuple(sorted(s for s in steps if s % self.slots))
        self.key_switches = sum(sum(1 for s in v if s) for v in self.babies.values()) + \
            sum(sum(1 for s in v if s) for v in self.giants.values())
        self.plaintext_mults = sum(len(v) for v in self.structure.values())
        self.schedule = self._schedule()

    def baby_rotations(self) -> frozenset:
        """``{(ji, s)}``: the baby rotations :meth:`apply` makes of its input ciphertexts (``s`` non-zero). A run
        makes each of a value's rotations once for all the maps that read it (:class:`hemx.nn.run.SharedRotations`;
        the plan counts them once, :func:`hemx.nn.passes.plan.share_rotations`)."""
        return frozenset((ji, s) for ji, steps in self.babies.items() for s in steps if s)

    def _schedule(self) -> tuple:
        """The order :meth:`apply` evaluates in: per output ciphertext, its giant steps ``(g, terms)``, each term one
        ``dot_plain`` of an input ciphertext's baby stack with this giant's diagonals (:class:`_Term`), numbered in
        :meth:`program_rows`' order (structure only: no diagonal values)."""
        present = {pair: {int(r) for r in rs} for pair, rs in self.structure.items()}
        out, row = [], 0
        for jo in range(self.out_layout.num_cts):
            giants = []
            for g in self.giants.get(jo, ()):
                terms = []
                for ji, steps in self.babies.items():
                    have = present.get((jo, ji), ())
                    keys = tuple((jo, ji, g + s) if g + s in have else None for s in steps)
                    if all(k is None for k in keys):
                        continue
                    pos = np.flatnonzero([k is not None for k in keys]).astype(np.int32)
                    pos.setflags(write=False)
                    terms.append(_Term(ji, keys, row, pos))
                    row += len(pos)
                giants.append((g, tuple(terms)))
            out.append(tuple(giants))
        if row != self.plaintext_mults:
            raise ParameterError(f"internal: the schedule holds {row} diagonals, the structure {self.plaintext_mults}")
        return tuple(out)

    def _choose_n1(self, ratio: float) -> int:
        best, best_cost = 1, math.inf
        n1 = 1
        while n1 <= self.slots:
            babies: dict[int, set] = {}
            giants: dict[int, set] = {}
            for (jo, ji), rs in self.structure.items():
                babies.setdefault(ji, set()).update(np.unique(rs % n1).tolist())
                giants.setdefault(jo, set()).update(np.unique(rs - rs % n1).tolist())
            cost = sum(len(b - {0}) for b in babies.values()) + ratio * sum(len(g - {0}) for g in giants.values())
            if cost < best_cost:
                best, best_cost = n1, cost
            n1 *= 2
        return best

    def diagonal_values(self) -> dict:
        """``{(jo, ji): {r: (slots,) array}}`` (built once, kept until :meth:`release`)."""
        if self._values is None:
            self._values = self._builder()
        return self._values

    def release(self) -> None:
        """Drop the cached float64 diagonals (up to 288 MiB per layer of ResNet-20 at N = 2^16, 2.45 GiB in all);
        the next use rebuilds them (0.002-0.8 s per layer, 3.3 s for the network, measured)."""
        self._values = None

    def program_rows(self) -> np.ndarray:
        """Every non-zero diagonal, pre-rotated by its giant step, in :attr:`schedule` order:
        ``(plaintext_mults, slots)`` float64, the layer's data as an argument of a traced program
        (:meth:`apply` with ``data``; ``CompiledNetwork.diagonals``). Uses the cached diagonals if there are any,
        and caches nothing."""
        values = self._values if self._values is not None else self._builder()
        out = np.empty((self.plaintext_mults, self.slots))
        for giants in self.schedule:
            for _, terms in giants:
                for term in terms:
                    i = term.start
                    for key in term.keys:
                        if key is not None:
                            jo, ji, r = key
                            out[i] = np.roll(values[(jo, ji)][r], r - r % self.n1)
                            i += 1
        return out

    def dense(self) -> np.ndarray:
        """The map as a dense ``(num_out_cts * slots, num_in_cts * slots)`` matrix (tests, small sizes)."""
        s = self.slots
        m = np.zeros((self.out_layout.num_cts * s, self.in_layout.num_cts * s))
        idx = np.arange(s)
        for (jo, ji), diags in self.diagonal_values().items():
            for r, d in diags.items():
                m[jo * s + idx, ji * s + (idx + r) % s] += d
        return m

    def _rows(self, term: "_Term") -> np.ndarray:
        """The pre-rotated diagonals ``roll(d_r, giant)`` of a term's non-zero keys, ``(len(term.pos), slots)``."""
        values = self.diagonal_values()
        out = np.empty((len(term.pos), self.slots))
        for i, k in enumerate(term.pos):
            jo, ji, r = term.keys[k]
            out[i] = np.roll(values[(jo, ji)][r], r - r % self.n1)
        return out

    def encode(self, ev, level: int, term: "_Term") -> Any:
        """A term's diagonals (one giant step's, for one input ciphertext; a zero row where a baby step has no
        diagonal) as one plaintext batch ``(len(term.keys),)`` of ``ev`` for a product at ``level``.

        Encoded plaintexts are large (at N = 2^16 and level 9, 5.5 MiB each: a 64 -> 64 conv's 1152 diagonals
        would be 6.3 GiB), so :meth:`apply` encodes one giant step's diagonals at a time."""
        if level < 1:
            raise LevelError("a linear layer consumes one level: its input is at level 0 (bootstrap first)")
        return encode_values(ev, self._rows(term), level=level, scale=ev.rescale_divisor(level),
                             rows=len(term.keys), pos=term.pos)

    def apply(self, ev, xs: Sequence, data: dict | None = None) -> list:
        """The map on the input ciphertexts ``xs`` (one per input ct, one level, any batch shape) -> output cts.

        Per input ciphertext, its baby rotations (hoisted) are stacked once; each giant step's sum over an input
        ciphertext is one :meth:`~hemx.circuits.Evaluator.dot_plain` of that stack with the giant's diagonals (a
        zero row where a baby has no diagonal in this giant: the maps are dense, 94-100 % of the rows at
        ResNet-20's layers), then one rescale and one giant rotation.

        ``data``: ``{"diagonals": (plaintext_mults, slots)[, "bias": (num_out_cts, slots)]}`` float64 arrays
        (:meth:`program_data`), possibly traced (arguments of a ``jax.jit`` / ``jax.export`` program); without
        it the rows come from the cached diagonals (:meth:`diagonal_values`). Both are encoded by
        :func:`encode_values`, one giant step at a time, so the two give the same plaintexts bit for bit."""
        if len(xs) != self.in_layout.num_cts:
            raise ShapeError(f"the layer takes {self.in_layout.num_cts} ciphertexts, got {len(xs)}")
        level = min(ev.level(x) for x in xs)
        xs = [ev.drop_level(x, level) if ev.level(x) > level else x for x in xs]
        if level < 1:
            raise LevelError("a linear layer consumes one level: its input is at level 0 (bootstrap first)")
        rows = None if data is None else data.get("diagonals")
        cache = None if data is None else data.get("plaintexts")
        stacks = {ji: ev.rotate_stack(xs[ji], steps) for ji, steps in self.babies.items()}
        outs = []
        for jo, giants in enumerate(self.schedule):
            acc_out = None
            for g, terms in giants:
                acc = None
                for term in terms:
                    if rows is None:  # this giant's rows only
                        pt = cached_plaintext(cache, ("term", term.start), level, ev.rescale_divisor(level),
                                              lambda: self.encode(ev, level, term))
                    else:
                        pt = encode_values(ev, rows[term.start:term.start + len(term.pos)], level=level,
                                           scale=ev.rescale_divisor(level), rows=len(term.keys), pos=term.pos)
                    product = ev.dot_plain(stacks[term.ji], pt)
                    acc = product if acc is None else ev.add(acc, product)
                acc = ev.rescale(acc)
                if g:
                    acc = ev.rotate(acc, g)
                acc_out = acc if acc_out is None else ev.add(acc_out, acc)
            if acc_out is None:  # no weight reaches this output ciphertext: zeros (plus the bias)
                first = ev.rescale(ev.mul_const(xs[0], 0.0, plain_scale=ev.rescale_divisor(level)))
                acc_out = first
            if self.bias is not None and np.any(self.bias[jo]):
                if data is not None and "bias" in data:
                    acc_out = add_values(ev, acc_out, data["bias"][jo])
                else:
                    lv, sc = ev.level(acc_out), ev.scale(acc_out)
                    acc_out = ev.add(acc_out, cached_plaintext(
                        cache, ("bias", jo), lv, sc, lambda: encode_values(ev, self.bias[jo], level=lv, scale=sc)))
            outs.append(acc_out)
        return outs

    def program_data(self, *, abstract: bool = False) -> dict:
        """The layer's argument of a traced program (:meth:`apply`'s ``data``): ``{"diagonals": ..., "bias": ...}``
        (the bias only when there is one), jax float64 arrays, or ``jax.ShapeDtypeStruct`` stand-ins with
        ``abstract=True`` (nothing is built)."""
        out = {"diagonals": (self.plaintext_mults, self.slots)}
        if self.bias is not None and np.any(self.bias):
            out["bias"] = self.bias.shape
        if abstract:
            return {k: jax.ShapeDtypeStruct(shape, jnp.float64) for k, shape in out.items()}
        return {k: jnp.asarray(self.program_rows() if k == "diagonals" else self.bias, dtype=jnp.float64)
                for k in out}


class _Term(NamedTuple):
    """One ``dot_plain`` of :meth:`DiagonalMap.apply`: input ciphertext ``ji``, the diagonal ``(jo, ji, r)`` of each
    baby step (None: a zero row), its first row in :meth:`DiagonalMap.program_rows`, and the positions ``pos`` of
    the non-zero rows among the baby steps."""

    ji: int
    keys: tuple
    start: int
    pos: np.ndarray


def _group(jo: np.ndarray, ji: np.ndarray, r: np.ndarray) -> dict:
    """Unique ``r`` per ``(jo, ji)``."""
    out = {}
    key = np.stack([jo, ji], axis=1)
    for pair in np.unique(key, axis=0):
        sel = (jo == pair[0]) & (ji == pair[1])
        out[(int(pair[0]), int(pair[1]))] = np.unique(r[sel])
    return out


def conv_output_layout(in_layout: Layout, c_out: int, out_hw: tuple[int, int], stride: int) -> Layout:
    """The layout a conv/pool writes: the input's grid, gap times stride, ``c_out`` channel blocks."""
    return image_layout((c_out,) + tuple(out_hw), in_layout.slots, grid=in_layout.grid, gap=in_layout.gap * stride)


def conv_map(in_layout: Layout, weight: np.ndarray, bias: np.ndarray | None, stride: int,
             padding: tuple[tuple[int, int], tuple[int, int]], *, bsgs_ratio: float = DEFAULT_BSGS_RATIO
             ) -> DiagonalMap:
    """A 2-D cross-correlation ``weight (C_out, C_in, KH, KW)`` on the channel-block layout (a :class:`DiagonalMap`)."""
    if in_layout.grid is None:
        raise ShapeError("a convolution needs an image (C, H, W) input")
    weight = np.asarray(weight, dtype=np.float64)
    c_out, c_in, kh, kw = weight.shape
    c, h, w = in_layout.shape
    if c != c_in:
        raise ShapeError(f"conv weight expects {c_in} input channels, the input has {c}")
    (top, bottom), (left, right) = padding
    ho = (h + top + bottom - kh) // stride + 1
    wo = (w + left + right - kw) // stride + 1
    if ho < 1 or wo < 1:
        raise ShapeError(f"a {kh}x{kw} kernel with padding {padding} does not fit a {h}x{w} input")
    g = in_layout.gap
    hg, wg = in_layout.grid
    if g * stride * (ho - 1) >= hg or g * stride * (wo - 1) >= wg:
        raise ParameterError(f"padding {padding} larger than the kernel's reach ({kh - 1}, {kw - 1}) is not supported "
                             "in the packed layout (the output would leave the grid)")
    out_layout = conv_output_layout(in_layout, c_out, (ho, wo), stride)
    block, slots, nb = in_layout.block, in_layout.slots, in_layout.blocks_per_ct
    # output pixel (oy, ox) at grid (g s oy, g s ox); tap (dy, dx) reads input pixel (s oy + dy - top, ...)
    oy, ox = np.meshgrid(np.arange(ho), np.arange(wo), indexing="ij")
    out_pos = (g * stride * oy * wg + g * stride * ox).reshape(-1)
    taps, masks, deltas = [], [], []
    for dy in range(kh):
        for dx in range(kw):
            iy, ix = stride * oy + dy - top, stride * ox + dx - left
            valid = ((iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)).reshape(-1)
            if not valid.any():
                continue
            mask = np.zeros(block)
            mask[out_pos[valid]] = 1.0
            taps.append((dy, dx))
            masks.append(mask)
            deltas.append(g * ((dy - top) * wg + (dx - left)))
    masks_arr = np.stack(masks)
    deltas_arr = np.asarray(deltas, dtype=np.int64)
    tap_w = np.stack([weight[:, :, dy, dx] for dy, dx in taps], axis=-1)  # (C_out, C_in, T)
    o_idx, i_idx, t_idx = np.nonzero(tap_w)
    if o_idx.size == 0:
        raise ParameterError("the convolution's weights are all zero")
    wts = tap_w[o_idx, i_idx, t_idx]
    r = ((i_idx % nb - o_idx % nb) * block + deltas_arr[t_idx]) % slots
    jo, ji = o_idx // nb, i_idx // nb
    structure = _group(jo, ji, r)
    bias_slots = None
    if bias is not None and np.any(bias):
        bias_full = np.zeros(out_layout.num_cts * slots)
        bias_full[out_layout.positions.reshape(c_out, -1)] = np.asarray(bias, dtype=np.float64)[:, None]
        bias_slots = bias_full.reshape(out_layout.num_cts, slots)

    def build() -> dict:
        out: dict = {}
        for (pjo, pji), rs in structure.items():
            sel = np.flatnonzero((jo == pjo) & (ji == pji))
            inv = np.searchsorted(rs, r[sel])
            d = np.zeros((len(rs), nb, block))
            for start in range(0, sel.size, _CHUNK):
                part = sel[start:start + _CHUNK]
                np.add.at(d, (inv[start:start + _CHUNK], o_idx[part] % nb),
                          wts[part, None] * masks_arr[t_idx[part]])
            d = d.reshape(len(rs), slots)
            out[(pjo, pji)] = {int(k): d[n] for n, k in enumerate(rs)}
        return out

    return DiagonalMap(in_layout, out_layout, structure, build, bias_slots, bsgs_ratio=bsgs_ratio)


def avgpool_map(in_layout: Layout, window: int, stride: int, **options) -> DiagonalMap:
    """Average pooling (no padding) as a depthwise conv with weights ``1 / window^2``."""
    c = in_layout.shape[0]
    weight = np.zeros((c, c, window, window))
    weight[np.arange(c), np.arange(c)] = 1.0 / (window * window)
    return conv_map(in_layout, weight, None, stride, ((0, 0), (0, 0)), **options)


def channel_affine_map(in_layout: Layout, scale: np.ndarray, shift: np.ndarray, **options) -> DiagonalMap:
    """A per-channel (images) or per-feature (vectors) ``x * scale + shift`` (a batch norm that could not be
    folded): one diagonal per ciphertext."""
    scale = np.asarray(scale, dtype=np.float64)
    shift = np.asarray(shift, dtype=np.float64)
    if in_layout.grid is None:
        return dense_map(in_layout, np.diag(scale), shift, out_stride=None, same_positions=True, **options)
    c = in_layout.shape[0]
    weight = np.zeros((c, c, 1, 1))
    weight[np.arange(c), np.arange(c), 0, 0] = scale
    return conv_map(in_layout, weight, shift, 1, ((0, 0), (0, 0)), **options)


def _dense_structure(in_pos: np.ndarray, out_pos: np.ndarray, f: np.ndarray, j: np.ndarray, slots: int):
    po, pi = out_pos[f], in_pos[j]
    jo, so, ji, si = po // slots, po % slots, pi // slots, pi % slots
    r = (si - so) % slots
    return jo, so, ji, r


def dense_map(in_layout: Layout, weight: np.ndarray, bias: np.ndarray | None, *, out_stride: int | None = None,
              same_positions: bool = False, bsgs_ratio: float = DEFAULT_BSGS_RATIO) -> DiagonalMap:
    """``y = weight @ x + bias`` on a vector layout; the output is a vector layout ``f -> f * stride`` with the
    stride (1, the input's spacing, or the widest spacing that fits one ciphertext) that needs the fewest output
    ciphertexts, then the fewest diagonals, or the input's own positions (``same_positions``, for element-wise
    maps)."""
    if len(in_layout.shape) != 1:
        raise ShapeError(f"a dense layer needs a vector (F,) input (Flatten first), got {in_layout.shape}")
    weight = np.asarray(weight, dtype=np.float64)
    f_out, f_in = weight.shape
    if f_in != in_layout.shape[0]:
        raise ShapeError(f"dense weight expects {f_in} inputs, the input has {in_layout.shape[0]}")
    slots = in_layout.slots
    in_pos = in_layout.positions.reshape(-1)
    f_idx, j_idx = np.nonzero(weight)
    if f_idx.size == 0:
        raise ParameterError("the dense layer's weights are all zero")
    wts = weight[f_idx, j_idx]
    if same_positions:
        if f_out != f_in:
            raise ShapeError("same_positions needs a square weight")
        candidates = [in_layout.replace(clean=True)]
    else:
        strides = {1}
        if out_stride is not None:
            strides = {int(out_stride)}
        elif in_pos.size > 1:
            diffs = np.diff(np.sort(in_pos))
            vals, counts = np.unique(diffs, return_counts=True)
            strides.add(int(vals[np.argmax(counts)]))
            # the widest spacing that still fits one ciphertext: a wide input spacing (1024 at CIFAR's dense
            # layers) would otherwise spread 1024 outputs over 32 ciphertexts, each bootstrapped later
            strides.add(max(1, slots // _next_pow2(f_out)))
        candidates = [vector_layout(f_out, slots, stride=s) for s in sorted(strides)]
    best = None
    for out_layout in candidates:
        out_pos = out_layout.positions.reshape(-1)
        jo, so, ji, r = _dense_structure(in_pos, out_pos, f_idx, j_idx, slots)
        count = np.unique(np.stack([jo, ji, r], axis=1), axis=0).shape[0]
        cost = (out_layout.num_cts, count)  # fewer output ciphertexts first (every later step runs per ciphertext)
        if best is None or cost < best[0]:
            best = (cost, out_layout, (jo, so, ji, r))
    _, out_layout, (jo, so, ji, r) = best
    structure = _group(jo, ji, r)
    bias_slots = None
    if bias is not None and np.any(bias):
        full = np.zeros(out_layout.num_cts * slots)
        full[out_layout.positions.reshape(-1)] = np.asarray(bias, dtype=np.float64)
        bias_slots = full.reshape(out_layout.num_cts, slots)

    def build() -> dict:
        out: dict = {}
        for (pjo, pji), rs in structure.items():
            sel = np.flatnonzero((jo == pjo) & (ji == pji))
            d = np.zeros((len(rs), slots))
            np.add.at(d, (np.searchsorted(rs, r[sel]), so[sel]), wts[sel])
            out[(pjo, pji)] = {int(k): d[n] for n, k in enumerate(rs)}
        return out

    return DiagonalMap(in_layout, out_layout, structure, build, bias_slots, bsgs_ratio=bsgs_ratio)


# ------------------------------------------------------------------------------------------------------------
# global average pooling: a mask and a rotate-and-sum inside every block
# ------------------------------------------------------------------------------------------------------------


class GlobalAvgPoolOp:
    """``(C, H, W) -> (C,)``: multiply by ``1 / (H W)`` on the pixels (one level, which also clears the other
    slots), then sum each block into its first slot with ``log2`` rotations along rows and columns.

    The output layout is the vector ``c -> c P`` (unclean: the other slots hold partial sums)."""

    depth = 1

    def __init__(self, in_layout: Layout):
        if in_layout.grid is None:
            raise ShapeError("global average pooling needs an image (C, H, W) input")
        c, h, w = in_layout.shape
        g, (hg, wg) = in_layout.gap, in_layout.grid
        self.in_layout = in_layout
        mask = np.zeros(in_layout.num_cts * in_layout.slots)
        mask[in_layout.positions.reshape(-1)] = 1.0 / (h * w)
        self.mask = mask.reshape(in_layout.num_cts, in_layout.slots)
        self.steps = tuple([g * (1 << k) for k in range(_next_pow2(w).bit_length() - 1)]
                           + [g * wg * (1 << k) for k in range(_next_pow2(h).bit_length() - 1)])
        pos = in_layout.positions[:, 0, 0].copy()
        pos.setflags(write=False)
        self.out_layout = Layout((c,), in_layout.slots, pos, in_layout.num_cts, None, 1, False)
        self.rotations = tuple(sorted({s % in_layout.slots for s in self.steps if s % in_layout.slots}))
        self.key_switches = len(self.steps) * in_layout.num_cts
        self.plaintext_mults = in_layout.num_cts

    def apply(self, ev, xs: Sequence, data: dict | None = None) -> list:
        """``data``: ``{"mask": (num_cts, slots)}`` (:meth:`program_data`), possibly traced, encoded in the program."""
        outs = []
        for j, x in enumerate(xs):
            level = ev.level(x)
            if level < 1:
                raise LevelError("global average pooling consumes one level: its input is at level 0")
            div = ev.rescale_divisor(level)
            if data is not None and "mask" in data:
                mask = encode_values(ev, data["mask"][j], level=level, scale=div)
            else:
                mask = cached_plaintext(None if data is None else data.get("plaintexts"), ("mask", j), level, div,
                                        lambda: encode_values(ev, self.mask[j], level=level, scale=div))
            y = ev.rescale(ev.mul_plain(x, mask))
            for s in self.steps:
                y = ev.add(y, ev.rotate(y, s))
            outs.append(y)
        return outs

    def program_data(self, *, abstract: bool = False) -> dict:
        """``{"mask": (num_cts, slots)}`` as a jax float64 array (or a ``jax.ShapeDtypeStruct``)."""
        if abstract:
            return {"mask": jax.ShapeDtypeStruct(self.mask.shape, jnp.float64)}
        return {"mask": jnp.asarray(self.mask, dtype=jnp.float64)}


# ------------------------------------------------------------------------------------------------------------
# encoding inside a traced program: the layers' float64 data as arguments (CompiledNetwork.diagonals)
# ------------------------------------------------------------------------------------------------------------


def encode_values(ev, values, *, level: int, scale: float, rows: int | None = None, pos=None):
    """Real slot values ``(..., slots)`` -> a plaintext of ``ev`` at ``level`` and ``scale``: the encoder of every
    linear layer's diagonals, biases and pooling masks, eager or traced (``ev.encode``; on hemx ciphertexts
    ``Context.encode``, whose encoder is :func:`hemx.ckks.encoder.encode_ntt`).

    ``rows``, ``pos``: the ``values`` rows are rows ``pos`` of a batch of ``rows`` (the others zero). ``values`` may
    be traced (an argument of a ``jax.jit`` / ``jax.export`` program): they are then encoded inside the program, so
    nothing of the encoded size is a constant, and without ``Context.encode``'s value checks
    (``CompiledNetwork.diagonals`` makes them where the data is built). Host values are checked and encoded at
    concrete time, also inside a trace (a constant of the program). Both are the same computation: the same
    values give the same plaintext bit for bit."""
    return ev.encode(values, level=level, scale=scale, rows=rows, pos=pos)


def cached_plaintext(cache: dict | None, key, level: int, scale: float, make: Callable[[], Any]):
    """The plaintext ``make()`` (an encoding at ``level`` and ``scale``), kept in ``cache`` under ``key`` and reused
    while it was made at the same level and scale (``cache``: one step's dict of ``CompiledNetwork.run``'s
    ``plaintexts``, filled by eager runs only; None: encode every time)."""
    if cache is None:
        return make()
    hit = cache.get(key)
    if hit is not None and hit[0] == level and hit[1] == scale:
        return hit[2]
    pt = make()
    cache[key] = (level, scale, pt)
    return pt


def add_values(ev, x, values):
    """``x + values`` (one ciphertext's slot values, possibly traced), the values encoded at ``x``'s level and
    scale by :func:`encode_values`."""
    return ev.add(x, encode_values(ev, values, level=ev.level(x), scale=ev.scale(x)))


__all__ = ["Layout", "check_images", "interleave", "deinterleave", "repeat_slots", "image_layout", "vector_layout",
           "DiagonalMap", "conv_map", "avgpool_map", "dense_map", "channel_affine_map", "conv_output_layout",
           "GlobalAvgPoolOp", "encode_values", "add_values", "cached_plaintext", "DEFAULT_BSGS_RATIO"]
