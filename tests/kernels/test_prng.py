"""The seeded uniform rows of switching keys (hemx.kernels.prng): ChaCha20 against RFC 8439's test vectors and an
independent Python-integer implementation, the stream order and masked rejection against a Python reference, and
the statistics of the result. The native kernels are checked against the same reference in
tests/kernels/native/test_native_prng.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hemx import nt
from hemx.errors import ParameterError
from hemx.kernels import prng

MASK32 = 0xFFFFFFFF


# ------------------------------------------------------------------------------------- the Python reference


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & MASK32


def chacha20_block_ref(key: list[int], counter: int, nonce: list[int]) -> list[int]:
    """RFC 8439, 2.3, on Python integers: the 16 output words."""
    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574] + list(key) + [counter & MASK32] + list(nonce)
    x = list(state)

    def qr(a, b, c, d):
        x[a] = (x[a] + x[b]) & MASK32
        x[d] = _rotl(x[d] ^ x[a], 16)
        x[c] = (x[c] + x[d]) & MASK32
        x[b] = _rotl(x[b] ^ x[c], 12)
        x[a] = (x[a] + x[b]) & MASK32
        x[d] = _rotl(x[d] ^ x[a], 8)
        x[c] = (x[c] + x[d]) & MASK32
        x[b] = _rotl(x[b] ^ x[c], 7)

    for _ in range(10):
        qr(0, 4, 8, 12), qr(1, 5, 9, 13), qr(2, 6, 10, 14), qr(3, 7, 11, 15)
        qr(0, 5, 10, 15), qr(1, 6, 11, 12), qr(2, 7, 8, 13), qr(3, 4, 9, 14)
    return [(a + b) & MASK32 for a, b in zip(x, state)]


def row_ref(key: list[int], d: int, q: int, n: int) -> list[int]:
    """One seeded row: groups of 16 blocks read word-major, each word masked to bitlen(q) bits, kept below q."""
    mask = (1 << q.bit_length()) - 1
    out: list[int] = []
    g = 0
    while len(out) < n:
        blocks = [chacha20_block_ref(key, 16 * g + i, [d, q, n]) for i in range(16)]
        for k in range(16):
            for i in range(16):
                v = blocks[i][k] & mask
                if v < q and len(out) < n:
                    out.append(v)
        g += 1
    return out


def rows_ref(key, moduli, digits: int, n: int) -> np.ndarray:
    return np.array([[row_ref(list(map(int, key)), d, int(q), n) for q in moduli] for d in range(digits)],
                    dtype=np.uint32)


# ---------------------------------------------------------------------------------------------- ChaCha20


def test_rfc8439_block_test_vector():
    """RFC 8439, 2.3.2: key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00, block counter 1."""
    key = np.frombuffer(bytes(range(32)), "<u4")
    nonce = np.frombuffer(bytes.fromhex("000000090000004a00000000"), "<u4")
    want = [0xE4E7F110, 0x15593BD1, 0x1FDD0F50, 0xC47120A3, 0xC7F4D1C7, 0x0368C033, 0x9AAA2204, 0x4E6CD4C3,
            0x466482D2, 0x09AA9F07, 0x05D7C214, 0xA2028BD9, 0xD19C12B5, 0xB94E16DE, 0xE883D0CB, 0x4E3C50A2]
    assert list(np.asarray(prng.chacha20_blocks(key, 1, nonce))) == want
    assert chacha20_block_ref(list(map(int, key)), 1, list(map(int, nonce))) == want


def test_rfc8439_keystream_vector():
    """RFC 8439, A.1 test vector #1: the all-zero key and nonce, counter 0: the first block's serialized bytes."""
    want = bytes.fromhex("76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
                         "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586")
    out = np.asarray(prng.chacha20_blocks(np.zeros(8, np.uint32), 0, np.zeros(3, np.uint32)))
    assert out.astype("<u4").tobytes() == want


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, MASK32), min_size=8, max_size=8), st.integers(0, MASK32),
       st.lists(st.integers(0, MASK32), min_size=3, max_size=3))
def test_chacha20_blocks_match_python_integers(key, counter, nonce):
    got = np.asarray(prng.chacha20_blocks(np.asarray(key, np.uint32), counter, np.asarray(nonce, np.uint32)))
    assert list(got) == chacha20_block_ref(key, counter, nonce)


def test_chacha20_blocks_broadcast_over_counters_and_nonces():
    key = np.arange(8, dtype=np.uint32) * 0x01010101
    counters = np.arange(5, dtype=np.uint32)
    nonces = np.stack([np.array([d, 97, 64], np.uint32) for d in range(3)])[:, None, :]  # (3, 1, 3)
    got = np.asarray(prng.chacha20_blocks(key, counters, nonces))
    assert got.shape == (3, 5, 16)
    for d in range(3):
        for c in range(5):
            assert list(got[d, c]) == chacha20_block_ref(list(map(int, key)), c, [d, 97, 64])


# ------------------------------------------------------------------------------------------- seeded rows

EDGE_MODULI = [3, 5, 97, 65537, (1 << 30) + 3, 2147483647, 2147483629]  # tiny, Fermat, 2^30 + 3 (bitlen 31), 2^31 - 1
STEPS = [1, 15, 16, 17, 255, 256, 257, 300]


@pytest.mark.parametrize("n", STEPS)
def test_rows_match_the_reference_at_every_length(n):
    key = np.arange(8, dtype=np.uint32) * 0x9E3779B9
    moduli = [97, 2147483647, 268369921]
    assert np.array_equal(np.asarray(prng.uniform_rows(key, moduli, digits=2, n=n)), rows_ref(key, moduli, 2, n))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, MASK32), min_size=8, max_size=8),
       st.lists(st.integers(1, (1 << 30) - 1).map(lambda v: 2 * v + 1), min_size=3, max_size=3))
def test_rows_match_the_reference_on_random_inputs(key, moduli):
    """Random keys and odd moduli below 2^31 (one shape: one compiled program for every example)."""
    key = np.asarray(key, np.uint32)
    assert np.array_equal(np.asarray(prng.uniform_rows(key, moduli, digits=2, n=300)), rows_ref(key, moduli, 2, 300))


def test_edge_moduli_and_a_row_that_needs_a_second_draw():
    """q = 3 keeps only 3 of 4 masked values, q = 2^30 + 3 barely half: their rows need more words than the first
    draw takes (prng.first_draw_groups assumes 15/16 kept), so the while loop draws again."""
    key = np.full(8, 0xDEADBEEF, np.uint32)
    n = 4 * prng.GROUP_WORDS
    assert (n + n // 16 + 64) / 0.5 > prng.first_draw_groups(n) * prng.GROUP_WORDS  # the first draw is too short
    got = np.asarray(prng.uniform_rows(key, EDGE_MODULI, digits=2, n=n))
    assert np.array_equal(got, rows_ref(key, EDGE_MODULI, 2, n))
    assert np.all(got < np.asarray(EDGE_MODULI, np.uint32)[None, :, None])


def test_a_row_depends_only_on_its_digit_modulus_and_length():
    key = np.arange(8, dtype=np.uint32)
    qs = nt.ntt_primes(28, 4, 256)
    full = np.asarray(prng.uniform_rows(key, qs, digits=3, n=256))
    assert np.array_equal(np.asarray(prng.uniform_rows(key, qs[1:3], digits=2, n=256)), full[:2, 1:3])
    assert np.array_equal(np.asarray(prng.uniform_rows(key, qs[::-1], digits=3, n=256))[:, ::-1], full)
    other_n = np.asarray(row_ref(list(map(int, key)), 0, qs[0], 512))[:256]
    assert np.mean(other_n == full[0, 0]) < 0.01  # n is in the nonce: rows of another ring share nothing
    assert np.mean(full[0] == full[1]) < 0.01


def test_rows_are_uniform():
    """Chi-square of residues mod 17 (where a plain modulo of 32-bit words would be biased) and of the top 4 bits of
    28- and 31-bit NTT primes' residues, on one fixed key (no flake)."""
    key = np.frombuffer(b"uniformity test key, 32 bytes.!!", "<u4").astype(np.uint32)
    x = np.asarray(prng.uniform_rows(key, [17], digits=4, n=4096)).ravel()
    counts = np.bincount(x, minlength=17)
    chi2 = float(((counts - x.size / 17) ** 2 / (x.size / 17)).sum())
    assert chi2 < 50.0, chi2  # 16 degrees of freedom
    qs = nt.ntt_primes(28, 2, 4096) + nt.ntt_primes(31, 2, 4096)
    rows = np.asarray(prng.uniform_rows(key, qs, digits=2, n=4096)).astype(np.float64)
    u = (rows / np.asarray(qs, np.float64)[None, :, None]).reshape(-1, 4096)
    for row in np.floor(u * 16).astype(int):
        counts = np.bincount(row, minlength=16)
        assert float(((counts - 256.0) ** 2 / 256.0).sum()) < 55.0  # 15 degrees of freedom


# ---------------------------------------------------------------------------------------- AES-128 counter


def aes_row_ref(key, d: int, q: int, n: int) -> list[int]:
    """One "aes128ctr" row: block c = AES-128 under the key's first 4 words of (c, d, q, n), its 4 words in order,
    each masked to bitlen(q) bits and kept below q (tests/helpers/aes_ref.py: FIPS 197 in plain Python)."""
    from tests.helpers import aes_ref

    round_keys = aes_ref.expand_key(b"".join(int(w).to_bytes(4, "little") for w in list(key)[:4]))
    mask = (1 << q.bit_length()) - 1
    out: list[int] = []
    c = 0
    while len(out) < n:
        block = b"".join(int(w).to_bytes(4, "little") for w in (c, d, q, n))
        enc = aes_ref.encrypt_block(round_keys, block)
        for i in range(4):
            v = int.from_bytes(enc[4 * i:4 * i + 4], "little") & mask
            if v < q and len(out) < n:
                out.append(v)
        c += 1
    return out


def aes_rows_ref(key, moduli, digits: int, n: int) -> np.ndarray:
    return np.array([[aes_row_ref(key, d, int(q), n) for q in moduli] for d in range(digits)], dtype=np.uint32)


def test_aes128_fips197_vector_and_key_schedule():
    """FIPS 197, Appendix C.1 (the cipher) and A.1 (the last round key of 2b7e1516...)."""
    key = np.frombuffer(bytes(range(16)) + bytes(16), "<u4").astype(np.uint32)
    block = np.frombuffer(bytes.fromhex("00112233445566778899aabbccddeeff"), "<u4").astype(np.uint32)
    got = np.asarray(prng.aes128_blocks(key, block[0], block[1:]))
    assert got.astype("<u4").tobytes().hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"
    k2 = np.frombuffer(bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c") + bytes(16), "<u4").astype(np.uint32)
    last = np.asarray(prng.aes128_round_keys(k2))[10].astype(np.uint8).tobytes().hex()
    assert last == "d014f9a8c9ee2589e13f0cc8b6630ca6"
    assert list(prng.SBOX[[0x00, 0x53, 0xFF]]) == [0x63, 0xED, 0x16]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, MASK32), min_size=8, max_size=8), st.integers(0, MASK32),
       st.lists(st.integers(0, MASK32), min_size=3, max_size=3))
def test_aes128_blocks_match_the_fips197_reference(key, counter, nonce):
    from tests.helpers import aes_ref

    got = np.asarray(prng.aes128_blocks(np.asarray(key, np.uint32), counter, np.asarray(nonce, np.uint32)))
    assert list(got) == aes_ref.ctr_words(key[:4], counter, nonce)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 255, 256, 257, 1000])
def test_aes_rows_match_the_reference_at_every_length(n):
    key = np.arange(8, dtype=np.uint32) * 0x9E3779B9 + 1
    moduli = [EDGE_MODULI[0], 12289, 2**31 - 1]
    got = np.asarray(prng.uniform_rows(key, moduli, digits=2, n=n, xof="aes128ctr"))
    assert np.array_equal(got, aes_rows_ref(key, moduli, 2, n))


def test_the_two_expansions_differ_and_bad_names_are_refused():
    key = np.arange(8, dtype=np.uint32)
    a = np.asarray(prng.uniform_rows(key, [12289], digits=1, n=64, xof="aes128ctr"))
    c = np.asarray(prng.uniform_rows(key, [12289], digits=1, n=64, xof="chacha20"))
    assert not np.array_equal(a, c)
    with pytest.raises(ParameterError, match="seed expansion"):
        prng.stream_words(key, 0, 12289, n=64, first_group=0, groups=1, xof="aes256")
