"""Exact bit packing of residues: each value stored in the bit width of its modulus.

A row of ``M`` values below ``2^w`` becomes the little-endian bit stream in which value ``i`` occupies bits
``[i w, (i + 1) w)``, stored as little-endian 64-bit words and zero-padded to a whole number of words. Since
64 values of ``w`` bits fill exactly ``w`` words, the packing works on blocks of 64 values: a fixed loop over
the 64 positions of a block, each step vectorized over every block of every row. A 28-bit residue then takes
3.5 bytes instead of 4, a 31-bit one 3.875.

Everything here is pure numpy on the host; nothing depends on the moduli beyond their bit widths.
"""

from __future__ import annotations

import numpy as np

from hemx.errors import ParameterError, SerializationError, ShapeError

BLOCK = 64  # values per block; a block of w-bit values is exactly w 64-bit words
CHUNK = 2048  # blocks per vectorized pass: small enough to stay in cache


def packed_words(count: int, width: int) -> int:
    """Number of 64-bit words holding ``count`` values of ``width`` bits."""
    return -(-count // BLOCK) * width


def _block_positions(width: int):
    """For each position p of a block: (word index, bit shift, spills into the next word)."""
    for p in range(BLOCK):
        bit = p * width
        word, shift = divmod(bit, 64)
        yield p, word, shift, shift + width > 64


def pack_rows(rows: np.ndarray, width: int) -> np.ndarray:
    """Pack values of ``width`` bits.

    Args:
        rows: unsigned integers ``(R, M)``, every value below ``2^width`` (the caller checks this).
        width: bits per value, 1..32.

    Returns:
        uint64 ``(R, packed_words(M, width))``.
    """
    _check_width(width)
    r, m = rows.shape
    blocks = -(-m // BLOCK)
    padded = np.zeros((r, blocks * BLOCK), dtype=np.uint32)
    padded[:, :m] = rows
    values = padded.reshape(r * blocks, BLOCK)
    out = np.empty((r * blocks, width), dtype=np.uint64)
    for lo in range(0, r * blocks, CHUNK):
        out[lo : lo + CHUNK] = _pack_blocks(values[lo : lo + CHUNK], width)
    return out.reshape(r, blocks * width)


def _pack_blocks(values: np.ndarray, width: int) -> np.ndarray:
    """uint32 ``(B, 64)`` values -> uint64 ``(B, width)`` words (position-major inside, cache-sized)."""
    v = values.T.astype(np.uint64)  # (64, B), each position contiguous
    out = np.zeros((width, values.shape[0]), dtype=np.uint64)
    tmp = np.empty(values.shape[0], dtype=np.uint64)
    for p, word, shift, spills in _block_positions(width):
        np.left_shift(v[p], np.uint64(shift), out=tmp)
        out[word] |= tmp
        if spills:
            np.right_shift(v[p], np.uint64(64 - shift), out=tmp)
            out[word + 1] |= tmp
    return out.T


def unpack_rows(words: np.ndarray, count: int, width: int) -> tuple[np.ndarray, bool]:
    """Inverse of :func:`pack_rows`.

    Args:
        words: uint64 ``(R, packed_words(count, width))``.
        count: values per row ``M``.
        width: bits per value.

    Returns:
        ``(values, padding_clear)``: uint32 ``(R, M)`` and whether every padding bit was zero (a stream with
        stray bits in its padding was not written by :func:`pack_rows`).
    """
    _check_width(width)
    r = words.shape[0]
    blocks = -(-count // BLOCK)
    if words.shape != (r, blocks * width):
        raise ShapeError(f"expected {blocks * width} words per row, got {words.shape[1]}")
    w = words.reshape(r * blocks, width)
    values = np.empty((r * blocks, BLOCK), dtype=np.uint32)
    for lo in range(0, r * blocks, CHUNK):
        values[lo : lo + CHUNK] = _unpack_blocks(w[lo : lo + CHUNK], width)
    # 64 values fill their words exactly, so every stored bit belongs to a value: stray bits can only sit in
    # the values that pad the last block
    flat = values.reshape(r, blocks * BLOCK)
    padding_clear = not np.any(flat[:, count:])
    return flat[:, :count], padding_clear


def _unpack_blocks(words: np.ndarray, width: int) -> np.ndarray:
    """uint64 ``(B, width)`` words -> uint32 ``(B, 64)`` values."""
    w = np.ascontiguousarray(words.T)  # (width, B)
    mask = np.uint64((1 << width) - 1)
    out = np.empty((BLOCK, words.shape[0]), dtype=np.uint32)
    v = np.empty(words.shape[0], dtype=np.uint64)
    tmp = np.empty(words.shape[0], dtype=np.uint64)
    for p, word, shift, spills in _block_positions(width):
        np.right_shift(w[word], np.uint64(shift), out=v)
        if spills:
            np.left_shift(w[word + 1], np.uint64(64 - shift), out=tmp)
            v |= tmp
        v &= mask
        out[p] = v
    return out.T


def _check_width(width: int) -> None:
    if not 1 <= width <= 32:
        raise ParameterError(f"width must be in [1, 32], got {width}")


def width_of(modulus: int) -> int:
    """Bits needed for every residue below ``modulus``."""
    return max(1, (int(modulus) - 1).bit_length())


def residues_nbytes(shape: tuple[int, ...], moduli) -> int:
    """Packed size in bytes of residues shaped ``(..., L, N)`` whose limb ``l`` is reduced mod ``moduli[l]``."""
    per_limb = _values_per_limb(shape, moduli)
    return 8 * sum(packed_words(per_limb, width_of(q)) for q in moduli)


def _values_per_limb(shape: tuple[int, ...], moduli) -> int:
    if len(shape) < 2 or shape[-2] != len(moduli):
        raise ShapeError(f"shape {shape} does not have {len(moduli)} limbs on axis -2")
    return int(np.prod(shape, dtype=object)) // len(moduli)


def _limbs_by_width(moduli) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for limb, q in enumerate(moduli):
        groups.setdefault(width_of(q), []).append(limb)
    return groups


def pack_residues(x: np.ndarray, moduli) -> bytes:
    """Residues uint32 ``(..., L, N)``, limb ``l`` below ``moduli[l]``, as packed bytes (limb after limb).

    Raises:
        SerializationError: a value is not below its limb's modulus (it would not survive packing).
    """
    x = np.asarray(x)
    per_limb = _values_per_limb(x.shape, moduli)
    rows = np.moveaxis(x, -2, 0).reshape(len(moduli), per_limb)
    qs = np.asarray(moduli, dtype=np.uint64).reshape(-1, 1)
    if rows.size and np.any(rows.astype(np.uint64) >= qs):
        raise SerializationError("cannot serialize residues that are not reduced: a value is >= its limb's modulus")
    packed: list[np.ndarray | None] = [None] * len(moduli)
    for width, limbs in _limbs_by_width(moduli).items():
        words = pack_rows(rows[limbs], width)
        for i, limb in enumerate(limbs):
            packed[limb] = words[i]
    return b"".join(p.astype("<u8").tobytes() for p in packed)


def unpack_residues(buf, shape: tuple[int, ...], moduli) -> np.ndarray:
    """Inverse of :func:`pack_residues`.

    Args:
        buf: exactly ``residues_nbytes(shape, moduli)`` bytes.
        shape: ``(..., L, N)``.
        moduli: ``L`` moduli.

    Returns:
        uint32 residues of ``shape``.

    Raises:
        SerializationError: a value is not below its modulus, or padding bits are set (not our packing).
    """
    per_limb = _values_per_limb(shape, moduli)
    if len(buf) != residues_nbytes(shape, moduli):
        raise SerializationError(f"packed residues of shape {tuple(shape)} need {residues_nbytes(shape, moduli)} "
                                 f"bytes, got {len(buf)}")
    words = np.frombuffer(buf, dtype="<u8").astype(np.uint64)
    offsets, start = [], 0
    for q in moduli:
        offsets.append(start)
        start += packed_words(per_limb, width_of(q))
    rows = np.empty((len(moduli), per_limb), dtype=np.uint32)
    for width, limbs in _limbs_by_width(moduli).items():
        size = packed_words(per_limb, width)
        stacked = np.stack([words[offsets[l] : offsets[l] + size] for l in limbs])
        values, padding_clear = unpack_rows(stacked, per_limb, width)
        if not padding_clear:
            raise SerializationError("packed residues have non-zero padding bits; the data was altered")
        qs = np.asarray([moduli[l] for l in limbs], dtype=np.uint64).reshape(-1, 1)
        if values.size and np.any(values >= qs):
            raise SerializationError("a stored residue is not below its modulus; the data is invalid")
        rows[limbs] = values
    lead = tuple(shape[:-2]) + (shape[-1],)
    return np.ascontiguousarray(np.moveaxis(rows.reshape((len(moduli),) + lead), 0, -2))
