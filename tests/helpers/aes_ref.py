"""AES-128 (FIPS 197) in plain Python, byte by byte from the standard's definitions: the independent reference the
tests hold the native and JAX AES-CTR streams against (checked itself against FIPS 197's example vectors)."""

from __future__ import annotations


def _xtime(b: int) -> int:
    b <<= 1
    return (b ^ 0x11B) if b & 0x100 else b


def _gmul(a: int, b: int) -> int:
    out = 0
    while b:
        if b & 1:
            out ^= a
        a = _xtime(a)
        b >>= 1
    return out


def _sbox_table() -> list[int]:
    """S-box from its definition: the multiplicative inverse in GF(2^8) followed by the affine map."""
    inv = [0] * 256
    for a in range(1, 256):
        for b in range(1, 256):
            if _gmul(a, b) == 1:
                inv[a] = b
                break
    box = []
    for a in range(256):
        x = inv[a]
        y = x
        for shift in range(1, 5):
            y ^= ((x << shift) | (x >> (8 - shift))) & 0xFF
        box.append(y ^ 0x63)
    return box


SBOX = _sbox_table()


def expand_key(key: bytes) -> list[list[int]]:
    """The 11 round keys of AES-128, each 16 bytes."""
    assert len(key) == 16
    words = [list(key[4 * i:4 * i + 4]) for i in range(4)]
    rcon = 1
    for i in range(4, 44):
        t = list(words[i - 1])
        if i % 4 == 0:
            t = t[1:] + t[:1]
            t = [SBOX[b] for b in t]
            t[0] ^= rcon
            rcon = _xtime(rcon)
        words.append([a ^ b for a, b in zip(words[i - 4], t)])
    return [sum(words[4 * r:4 * r + 4], []) for r in range(11)]


def encrypt_block(round_keys: list[list[int]], block: bytes) -> bytes:
    """One AES-128 encryption (state column-major, as FIPS 197 lays it out)."""
    s = [b ^ k for b, k in zip(block, round_keys[0])]
    for r in range(1, 11):
        s = [SBOX[b] for b in s]
        s = [s[(c * 4 + row + 4 * row) % 16] for c in range(4) for row in range(4)]  # ShiftRows
        if r < 10:
            mixed = []
            for c in range(4):
                a = s[4 * c:4 * c + 4]
                mixed += [_gmul(a[0], 2) ^ _gmul(a[1], 3) ^ a[2] ^ a[3],
                          a[0] ^ _gmul(a[1], 2) ^ _gmul(a[2], 3) ^ a[3],
                          a[0] ^ a[1] ^ _gmul(a[2], 2) ^ _gmul(a[3], 3),
                          _gmul(a[0], 3) ^ a[1] ^ a[2] ^ _gmul(a[3], 2)]
            s = mixed
        s = [b ^ k for b, k in zip(s, round_keys[r])]
    return bytes(s)


def ctr_words(key_words, counter: int, nonce_words) -> list[int]:
    """The four little-endian words of AES-128(K, block (counter, nonce[0], nonce[1], nonce[2])) with the key K the
    little-endian bytes of ``key_words`` (4 uint32)."""
    key = b"".join(int(w).to_bytes(4, "little") for w in key_words)
    block = b"".join(int(w).to_bytes(4, "little") for w in (counter, *nonce_words))
    out = encrypt_block(expand_key(key), block)
    return [int.from_bytes(out[4 * i:4 * i + 4], "little") for i in range(4)]
