"""Seeded uniform polynomials in JAX: the ChaCha20 or AES-128 counter stream hemx expands the uniform half of a
switching key from.

The stream of one row (digit ``d``, modulus ``q``, ring degree ``n``) under a 256-bit stream key ``K`` (8 uint32
words; :func:`hemx.ckks.sampling.stream_key` derives it from a key's seed):

* block ``c`` is the ChaCha20 block function of RFC 8439 (20 rounds) with key ``K``, block counter ``c`` and the
  three nonce words ``(d, q, n)``;
* blocks are read in groups of 16 (counters ``16 g .. 16 g + 15``), word-major: position ``16 k + i`` of group ``g``
  is word ``k`` of block ``16 g + i`` (the order in which 16 SIMD lanes compute 16 blocks);
* each word ``w`` gives ``v = w & mask`` with ``mask = 2^bitlen(q) - 1``, kept when ``v < q`` (exactly uniform:
  every residue has one preimage among the masked values; at least half are kept);
* the row is the first ``n`` kept values.

The "aes128ctr" expansion differs only in the blocks (:func:`aes128_blocks`): block ``c`` is AES-128 (FIPS 197) under
``K``'s first 4 words of the words ``(c, d, q, n)``, and gives the words ``4c .. 4c + 3``, in order (64 blocks a
group). CPUs run it on their AES instructions (AES-NI, VAES, AArch64's FEAT_AES), three to four times as fast as
ChaCha20 there, which is why compact keys use it by default (``hemx.ckks.keys.DEFAULT_XOF``).

A row depends on ``(K, d, q, n)`` only, so a key restricted to its leading digits and limbs (a levelled key) has
exactly the leading rows of the full key. The native CPU kernels (``csrc/prng_impl.h``; :func:`hemx.kernels.native.
uniform`, and the key-switching product that generates the rows on the fly) compute the same stream; this module
is the portable definition, used where the native kernels are not (other backends, ``jax.export`` for cuda / tpu,
``HEMX_NATIVE=0``). Every function here is jit-able; the result is exact (a ``lax.while_loop`` draws more groups for
any row the first draw left short).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import ParameterError

CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"
DOUBLE_ROUNDS = 10  # ChaCha20
GROUP_BLOCKS = 16
GROUP_WORDS = 16 * GROUP_BLOCKS


def _rotl(x, k: int):
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _quarter(x, a: int, b: int, c: int, d: int) -> None:
    x[a] = x[a] + x[b]
    x[d] = _rotl(x[d] ^ x[a], 16)
    x[c] = x[c] + x[d]
    x[b] = _rotl(x[b] ^ x[c], 12)
    x[a] = x[a] + x[b]
    x[d] = _rotl(x[d] ^ x[a], 8)
    x[c] = x[c] + x[d]
    x[b] = _rotl(x[b] ^ x[c], 7)


def chacha20_blocks(key, counter, nonce):
    """ChaCha20 blocks (RFC 8439, 2.3): uint32 ``(..., 16)`` for block counters ``counter`` ``(...)`` and nonce words
    ``nonce`` ``(..., 3)`` (broadcast together) under the key ``key`` ``(8,)`` (little-endian words of the 32-byte
    key)."""
    key = jnp.asarray(key, jnp.uint32)
    counter = jnp.asarray(counter, jnp.uint32)
    nonce = jnp.asarray(nonce, jnp.uint32)
    shape = jnp.broadcast_shapes(counter.shape, nonce.shape[:-1])
    state = [jnp.full(shape, c, jnp.uint32) for c in CONSTANTS]
    state += [jnp.broadcast_to(key[i], shape) for i in range(8)]
    state += [jnp.broadcast_to(counter, shape)] + [jnp.broadcast_to(nonce[..., i], shape) for i in range(3)]
    def double_round(_, words):
        x = list(words)
        _quarter(x, 0, 4, 8, 12)
        _quarter(x, 1, 5, 9, 13)
        _quarter(x, 2, 6, 10, 14)
        _quarter(x, 3, 7, 11, 15)
        _quarter(x, 0, 5, 10, 15)
        _quarter(x, 1, 6, 11, 12)
        _quarter(x, 2, 7, 8, 13)
        _quarter(x, 3, 4, 9, 14)
        return tuple(x)

    # a rolled loop: the program holds one double round, not ten (an unrolled one took XLA seconds to minutes to
    # compile)
    x = jax.lax.fori_loop(0, DOUBLE_ROUNDS, double_round, tuple(state))
    return jnp.stack([a + b for a, b in zip(x, state)], axis=-1)


# ------------------------------------------------------------------------------------------------ AES-128


def _xtime(b):
    """Doubling in GF(2^8) (AES's polynomial x^8 + x^4 + x^3 + x + 1), on byte values held in uint32."""
    return ((b << np.uint32(1)) ^ jnp.where(b & np.uint32(0x80), np.uint32(0x11B), np.uint32(0))) & np.uint32(0xFF)


def _sbox() -> np.ndarray:
    """FIPS 197's S-box from its definition: the inverse in GF(2^8) (a^254), then the affine map."""
    def mul(a, b):
        out = 0
        for _ in range(8):
            out ^= a if b & 1 else 0
            a = ((a << 1) ^ (0x11B if a & 0x80 else 0)) & 0xFF
            b >>= 1
        return out

    box = np.zeros(256, np.uint32)
    for a in range(256):
        inv, base, e = 1, a, 254
        while e:
            if e & 1:
                inv = mul(inv, base)
            base, e = mul(base, base), e >> 1
        y = inv
        for k in range(1, 5):
            y ^= ((inv << k) | (inv >> (8 - k))) & 0xFF
        box[a] = y ^ 0x63
    return box


SBOX = _sbox()
# ShiftRows on the column-major state (byte (row, col) at 4 col + row): new (r, c) = old (r, c + r mod 4)
_SHIFT_ROWS = np.array([4 * ((c + r) % 4) + r for c in range(4) for r in range(4)], np.int32)


def _bytes(words):
    """uint32 words (..., k) -> their little-endian bytes (..., 4 k) as uint32 values 0..255."""
    shifts = np.array([0, 8, 16, 24], np.uint32)
    return ((words[..., None] >> shifts) & np.uint32(0xFF)).reshape(words.shape[:-1] + (4 * words.shape[-1],))


def _words(b):
    """Little-endian bytes (..., 4 k) -> uint32 words (..., k)."""
    b = b.reshape(b.shape[:-1] + (b.shape[-1] // 4, 4))
    return b[..., 0] | (b[..., 1] << np.uint32(8)) | (b[..., 2] << np.uint32(16)) | (b[..., 3] << np.uint32(24))


def aes128_round_keys(key):
    """FIPS 197, 5.2: the 11 round keys of AES-128 under the first 4 words of ``key`` (little-endian bytes), as
    uint32 bytes ``(11, 16)``."""
    sbox = jnp.asarray(SBOX)
    w = list(_bytes(jnp.asarray(key, jnp.uint32)[:4]).reshape(4, 4))
    rcon = 1
    for i in range(4, 44):
        t = w[i - 1]
        if i % 4 == 0:
            t = sbox[jnp.roll(t, -1)] ^ jnp.asarray([rcon, 0, 0, 0], jnp.uint32)
            rcon = ((rcon << 1) ^ (0x11B if rcon & 0x80 else 0)) & 0xFF
        w.append(w[i - 4] ^ t)
    return jnp.stack(w).reshape(11, 16)


def aes128_blocks(key, counter, nonce):
    """AES-128 counter blocks of the "aes128ctr" expansion: uint32 ``(..., 4)``, the encryption under ``key``'s first
    4 words of the words ``(counter, nonce[0], nonce[1], nonce[2])`` (little-endian bytes), for counters ``counter``
    ``(...)`` and nonce words ``nonce`` ``(..., 3)`` (broadcast together)."""
    sbox = jnp.asarray(SBOX)
    rk = aes128_round_keys(key)
    counter = jnp.asarray(counter, jnp.uint32)
    nonce = jnp.asarray(nonce, jnp.uint32)
    shape = jnp.broadcast_shapes(counter.shape, nonce.shape[:-1])
    block = jnp.concatenate([jnp.broadcast_to(counter, shape)[..., None], jnp.broadcast_to(nonce, shape + (3,))],
                            axis=-1)
    state = _bytes(block) ^ rk[0]

    def mix(s):  # MixColumns on the (..., 4 columns, 4 rows) state
        c = s.reshape(s.shape[:-1] + (4, 4))
        a0, a1, a2, a3 = c[..., 0], c[..., 1], c[..., 2], c[..., 3]
        t = a0 ^ a1 ^ a2 ^ a3
        out = jnp.stack([a0 ^ t ^ _xtime(a0 ^ a1), a1 ^ t ^ _xtime(a1 ^ a2), a2 ^ t ^ _xtime(a2 ^ a3),
                         a3 ^ t ^ _xtime(a3 ^ a0)], axis=-1)
        return out.reshape(s.shape)

    def middle_round(r, s):
        return mix(sbox[s][..., _SHIFT_ROWS]) ^ rk[r]

    state = jax.lax.fori_loop(1, 10, middle_round, state)  # rolled: one round in the program
    return _words(sbox[state][..., _SHIFT_ROWS] ^ rk[10])


# ----------------------------------------------------------------------------------------------- the streams
#: The seed expansions a compact key may name (``hemx.ckks.keys.XOFS`` adds the host-only SHAKE-256).
STREAM_XOFS = ("chacha20", "aes128ctr")


def stream_words(key, digit, q, *, n: int, first_group, groups: int, xof: str = "chacha20"):
    """Words ``[256 first_group, 256 (first_group + groups))`` of the streams of the rows ``(digit, q)`` (arrays of
    one shape ``S``): uint32 ``(*S, 256 groups)`` in stream order. ``xof``: "chacha20" (16 blocks a group, word-major)
    or "aes128ctr" (64 AES blocks a group, block c giving the words 4 c .. 4 c + 3)."""
    digit, q = jnp.asarray(digit, jnp.uint32), jnp.asarray(q, jnp.uint32)
    g = jnp.asarray(first_group, jnp.uint32) + jnp.arange(groups, dtype=jnp.uint32)
    nonce = jnp.stack([digit, q, jnp.full(digit.shape, n, jnp.uint32)], axis=-1)
    if xof == "aes128ctr":
        per = GROUP_WORDS // 4
        counters = (g[:, None] * np.uint32(per) + jnp.arange(per, dtype=jnp.uint32)).reshape(-1)
        blocks = aes128_blocks(key, counters, nonce[..., None, :])  # (*S, groups * 64 blocks, 4 words)
        return blocks.reshape(digit.shape + (groups * GROUP_WORDS,))
    if xof != "chacha20":
        raise ParameterError(f"unknown seed expansion {xof!r}; choose one of {STREAM_XOFS}")
    counters = (g[:, None] * np.uint32(GROUP_BLOCKS) + jnp.arange(GROUP_BLOCKS, dtype=jnp.uint32)).reshape(-1)
    blocks = chacha20_blocks(key, counters, nonce[..., None, :])  # (*S, groups * 16 blocks, 16 words)
    blocks = blocks.reshape(digit.shape + (groups, GROUP_BLOCKS, 16))
    return jnp.swapaxes(blocks, -1, -2).reshape(digit.shape + (groups * GROUP_WORDS,))  # word-major in a group


def masks(q):
    """``2^bitlen(q) - 1`` for each modulus (uint32, ``q < 2^31``)."""
    q = jnp.asarray(q, jnp.uint32)
    bits = np.uint32(32) - jax.lax.clz(q)
    return ((jnp.uint32(1) << bits) - np.uint32(1)).astype(jnp.uint32)


def first_draw_groups(n: int) -> int:
    """Groups the first draw takes per row: enough for ``n`` kept values when at least 15/16 of the words are
    kept, with a margin (hemx's NTT primes keep 98-100 %); rows that keep fewer draw again."""
    return -(-(n + n // 16 + 64) // GROUP_WORDS)


@partial(jax.jit, static_argnames=("digits", "n", "xof"))
def uniform_rows(key, moduli, *, digits: int, n: int, xof: str = "chacha20"):
    """The seeded rows of a switching key's uniform half: uint32 ``(digits, m, n)``, row ``(d, l)`` the stream of
    ``(key, d, moduli[l], n)`` (module docstring) by the expansion ``xof`` ("chacha20" or "aes128ctr"). ``key``:
    ``(8,)``; ``moduli``: ``(m,)`` (each odd, below 2^31)."""
    q = jnp.asarray(moduli, jnp.uint32).reshape(-1)
    m = q.shape[0]
    d = jnp.repeat(jnp.arange(digits, dtype=jnp.uint32), m)
    qq = jnp.tile(q, digits)
    mask = masks(qq)
    rows = digits * m
    chunk = first_draw_groups(n)
    row_ids = jnp.arange(rows)[:, None]

    def body(state):
        out, filled, group = state
        v = stream_words(key, d, qq, n=n, first_group=group, groups=chunk, xof=xof) & mask[:, None]
        keep = v < qq[:, None]
        pos = filled[:, None] + jnp.cumsum(keep, axis=1, dtype=jnp.int32) - 1
        ok = keep & (pos < n)
        out = out.at[row_ids, jnp.where(ok, pos, n)].set(v, mode="drop")
        filled = jnp.minimum(filled + jnp.sum(keep, axis=1, dtype=jnp.int32), n)
        return out, filled, group + np.uint32(chunk)

    state = (jnp.zeros((rows, n), jnp.uint32), jnp.zeros((rows,), jnp.int32), jnp.uint32(0))
    out, _, _ = jax.lax.while_loop(lambda s: jnp.any(s[1] < n), body, state)
    return out.reshape(digits, m, n)


__all__ = ["chacha20_blocks", "aes128_blocks", "aes128_round_keys", "stream_words", "uniform_rows", "masks",
           "first_draw_groups", "STREAM_XOFS", "SBOX"]
