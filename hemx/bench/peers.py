"""Peer HE libraries timed beside hemx in the same process: desilofhe (CPU engine) and TenSEAL (SEAL).

Peers are optional (``pip install hemx[peers]``) and imported lazily: a missing peer is reported as such,
never an error. Each adapter builds the closest configuration it supports to a hemx parameter set (same N
where the peer allows it, the nearest log Q within the peer's own limits) and says what it built.

Operations (``None`` where the peer has no separate primitive):
``add``: ct + ct; ``mul``: ct x ct with relinearization, no rescale; ``rescale``; ``mul_rescale``: ct x ct,
relinearization and rescale; ``rotate``: rotation by one slot; ``rotate16``: the 16 rotations of one ciphertext
by :data:`ROTATE_MANY_STEPS` (1..16 slots), each peer's fastest way (desilofhe ``Engine.rotate_many`` with one
fixed rotation key per step; SEAL has no hoisted rotation: 16 ``rotate_vector`` calls, one Galois key per step).
An adapter without some operation leaves it out of ``PeerSetup.ops`` (no result row) or maps it to ``None``
(a row saying it has no such primitive). Every rotation is to the left, like ``numpy.roll(values, -steps)``
(hemx's, desilofhe 2.0's and SEAL's convention alike); ``PeerSetup.precision`` holds the worst-slot bits of
precision of the peer's own results, checked against numpy.

Kernels (:meth:`ntt_setup`): the closest exposed primitive to hemx's NTT is the forward NTT of a whole
ciphertext in coefficient form (desilofhe ``Engine.ntt``, SEAL ``Evaluator.transform_to_ntt``): two
polynomials times the ciphertext's limbs, in the peer's 64-bit words, including the allocation of its output.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

OPS = ("add", "mul", "rescale", "mul_rescale", "rotate", "rotate16")
ROTATE_MANY_STEPS = tuple(range(1, 17))  # the steps of ``rotate16``


@dataclasses.dataclass
class PeerKernel:
    """A peer's NTT of one ciphertext: ``run()`` transforms ``transforms`` one-limb polynomials of degree n."""

    name: str
    n: int
    transforms: int
    note: str
    run: Callable[[], object]


@dataclasses.dataclass
class PeerSetup:
    """What a peer built for one benchmark configuration."""

    name: str
    n: int
    levels: int
    log_q: float | None
    note: str
    ops: dict[str, Callable[[], object] | None]
    precision_bits: float | None = None  # of ``mul_rescale``
    precision: dict[str, float] = dataclasses.field(default_factory=dict)  # op -> worst-slot bits vs numpy


def rotations_precision(x, got) -> tuple[float, float]:
    """Worst-slot bits of (a rotation by 1, the 16 rotations by :data:`ROTATE_MANY_STEPS`) against numpy.

    ``got``: the decrypted rotation by 1 and the 16 decrypted rotations (slot vectors)."""
    one, many = got
    bits16 = min(_precision(np.roll(x, -k), v) for k, v in zip(ROTATE_MANY_STEPS, many, strict=True))
    return _precision(np.roll(x, -1), one), bits16


def _precision(want, got) -> float:
    err = np.max(np.abs(np.asarray(got)[: len(want)] - want))
    return float(-math.log2(max(err, 2.0 ** -60)))


class DesiloAdapter:
    """desilofhe's CPU engine. N follows from ``max_level`` (the engine chooses it); its moduli are not exposed."""

    name = "desilofhe"

    def __init__(self, threads: int):
        self.threads = threads

    @staticmethod
    def available() -> str | None:
        try:
            import desilofhe  # noqa: F401
        except Exception as exc:  # pragma: no cover - depends on the environment
            return f"not installed ({type(exc).__name__})"
        return None

    def _engine(self, n: int, levels: int):
        """(max_level, engine) with ring degree ``n``, or None. The engine picks N from max_level: start at
        hemx's level count and walk towards ``n``; the first level count giving ``n`` is the nearest to hemx's."""
        import desilofhe

        cand, seen = max(1, levels), set()
        while cand not in seen and 1 <= cand <= 36:
            seen.add(cand)
            eng = desilofhe.Engine(max_level=cand, mode="cpu", thread_count=self.threads)
            got = eng.slot_count * 2
            if got == n:
                return cand, eng
            cand = cand + 1 if got < n else cand - 1
        return None

    @staticmethod
    def _words_per_poly(ct, n: int) -> int:
        """64-bit limbs of one polynomial of a ciphertext, from its byte size (the moduli are not exposed)."""
        return int(ct.nbytes // (8 * n * ct.polynomial_count))

    def ntt_setup(self, n: int, levels: int) -> PeerKernel | None:
        chosen = self._engine(n, levels)
        if chosen is None:
            return None
        max_level, e = chosen
        sk = e.create_secret_key()
        ct = e.encrypt(np.random.default_rng(2).uniform(-1, 1, e.slot_count), e.create_public_key(sk))
        coeff = e.intt(ct)
        limbs = self._words_per_poly(coeff, n)
        return PeerKernel(self.name, n, 2 * limbs, f"Engine.ntt of a ciphertext in coefficient form, max_level="
                          f"{max_level}, 2 x {limbs} 64-bit limbs, {self.threads} threads", lambda: e.ntt(coeff))

    def setup(self, n: int, levels: int) -> PeerSetup | None:
        chosen = self._engine(n, levels)
        if chosen is None:
            return None
        max_level, e = chosen
        sk = e.create_secret_key()
        pk = e.create_public_key(sk)
        rk = e.create_relinearization_key(sk)
        # one fixed rotation key per step: rotate_many with them beats 16 rotate() calls (~2.2x at N = 2^15) and
        # rotate_many with the power-of-two RotationKey (which composes steps that are not powers of two)
        fixed = [e.create_fixed_rotation_key(sk, k) for k in ROTATE_MANY_STEPS]
        rot = fixed[0]  # delta 1
        x = np.random.default_rng(1).uniform(-1, 1, e.slot_count)
        a, b = e.encrypt(x, pk), e.encrypt(x, pk)
        prec = _precision(x * x, e.decrypt(e.multiply(a, b, rk), sk))
        rot_bits, rot16_bits = rotations_precision(
            x, (e.decrypt(e.rotate(a, rot), sk), [e.decrypt(c, sk) for c in e.rotate_many(a, fixed)]))
        limbs = self._words_per_poly(a, n)
        return PeerSetup(
            self.name, n, max_level, None,
            f"CPU engine, {self.threads} threads, max_level={max_level}, {limbs} 64-bit limbs per polynomial "
            "(moduli not exposed); multiply() relinearizes and rescales; rotate16: rotate_many with 16 fixed "
            "rotation keys (batched)",
            {
                "add": lambda: e.add(a, b),
                "mul": None,
                "rescale": None,
                "mul_rescale": lambda: e.multiply(a, b, rk),
                "rotate": lambda: e.rotate(a, rot),
                "rotate16": lambda: e.rotate_many(a, fixed),
            },
            prec,
            {"rotate": rot_bits, "rotate16": rot16_bits},
        )


class TenSEALAdapter:
    """Microsoft SEAL through TenSEAL's ``sealapi`` evaluator (single-threaded per operation)."""

    name = "tenseal"
    MAX_LOG_QP = {1 << 12: 109, 1 << 13: 218, 1 << 14: 438, 1 << 15: 881}  # SEAL's 128-bit limits

    def __init__(self, threads: int = 1):
        self.threads = 1  # SEAL runs one operation on one thread; the argument keeps the adapters uniform

    @staticmethod
    def available() -> str | None:
        try:
            import tenseal  # noqa: F401
        except Exception as exc:  # pragma: no cover
            return f"not installed ({type(exc).__name__})"
        return None

    def _context(self, n: int, levels: int):
        """(context, coeff_mod_bit_sizes, levels) at ring degree n, or None where SEAL has no 128-bit bound."""
        import tenseal as ts

        if n not in self.MAX_LOG_QP:
            return None
        budget = self.MAX_LOG_QP[n]
        # special prime and base of 60 bits when they fit, levels of equal size filling the budget
        edge = 60 if budget >= 180 else 40
        lv = max(1, min(levels, (budget - 2 * edge) // 30))
        mid = min(60, (budget - 2 * edge) // lv)
        bits = [edge] + [mid] * lv + [edge]
        ctx = ts.context(ts.SCHEME_TYPE.CKKS, poly_modulus_degree=n, coeff_mod_bit_sizes=bits)
        ctx.global_scale = 2.0 ** mid
        ctx.auto_relin = ctx.auto_rescale = ctx.auto_mod_switch = False
        return ctx, bits, lv

    def ntt_setup(self, n: int, levels: int) -> PeerKernel | None:
        import tenseal as ts
        import tenseal.sealapi as sa

        made = self._context(n, levels)
        if made is None:
            return None
        ctx, bits, _ = made
        ct = ts.ckks_vector(ctx, np.random.default_rng(2).uniform(-1, 1, n // 2).tolist()).ciphertext()[0]
        ev = sa.Evaluator(ctx.seal_context().data)
        coeff = sa.Ciphertext()
        ev.transform_from_ntt(ct, coeff)

        def run():
            out = sa.Ciphertext()
            ev.transform_to_ntt(coeff, out)
            return out

        limbs = ct.coeff_modulus_size()
        return PeerKernel(self.name, n, ct.size() * limbs, f"Evaluator.transform_to_ntt of a ciphertext, "
                          f"{ct.size()} x {limbs} limbs, coeff_mod_bit_sizes={bits}, single-threaded", run)

    def setup(self, n: int, levels: int) -> PeerSetup | None:
        import tenseal as ts
        import tenseal.sealapi as sa

        made = self._context(n, levels)
        if made is None:
            return None
        ctx, bits, lv = made
        budget = self.MAX_LOG_QP[n]
        ctx.generate_galois_keys()
        ctx.generate_relin_keys()
        x = np.random.default_rng(1).uniform(-1, 1, n // 2)
        va, vb = ts.ckks_vector(ctx, x.tolist()), ts.ckks_vector(ctx, x.tolist())
        ev = sa.Evaluator(ctx.seal_context().data)
        rk, gk = ctx.relin_keys().data, ctx.galois_keys().data
        a, b = va.ciphertext()[0], vb.ciphertext()[0]

        def mul():
            out = sa.Ciphertext()
            ev.multiply(a, b, out)
            ev.relinearize_inplace(out, rk)
            return out

        prod = mul()

        def rescale():
            out = sa.Ciphertext()
            ev.rescale_to_next(prod, out)
            return out

        def mul_rescale():
            out = mul()
            ev.rescale_to_next_inplace(out)
            return out

        def add():
            out = sa.Ciphertext()
            ev.add(a, b, out)
            return out

        def rotate():
            out = sa.Ciphertext()
            ev.rotate_vector(a, 1, gk, out)
            return out

        # rotate16: SEAL has no hoisted rotation; one Galois key per step (element 3^step mod 2N, SEAL's left
        # rotation), so no step is composed from power-of-two rotations
        gk16 = sa.GaloisKeys()
        sa.KeyGenerator(ctx.seal_context().data, ctx.secret_key().data).create_galois_keys(
            [pow(3, k, 2 * n) for k in ROTATE_MANY_STEPS], gk16)

        def rotate16():
            outs = [sa.Ciphertext() for _ in ROTATE_MANY_STEPS]
            for k, out in zip(ROTATE_MANY_STEPS, outs):
                ev.rotate_vector(a, k, gk16, out)
            return outs

        dec = sa.Decryptor(ctx.seal_context().data, ctx.secret_key().data)
        encoder = sa.CKKSEncoder(ctx.seal_context().data)

        def values(ct):
            pt = sa.Plaintext()
            dec.decrypt(ct, pt)
            return np.asarray(encoder.decode_double(pt))

        rot_bits, rot16_bits = rotations_precision(x, (values(rotate()), [values(c) for c in rotate16()]))
        return PeerSetup(
            self.name, n, lv, float(sum(bits) - bits[-1]),
            f"SEAL via tenseal.sealapi, coeff_mod_bit_sizes={bits} (log QP {sum(bits)}, SEAL's 128-bit limit "
            f"{budget}), single-threaded; rotate16: 16 rotate_vector calls, one Galois key per step (SEAL has no "
            "hoisted rotation)",
            {"add": add, "mul": mul, "rescale": rescale, "mul_rescale": mul_rescale, "rotate": rotate,
             "rotate16": rotate16},
            None,
            {"rotate": rot_bits, "rotate16": rot16_bits},
        )


ADAPTERS = {"desilofhe": DesiloAdapter, "tenseal": TenSEALAdapter}
DEFAULT_PEERS = ("desilofhe", "tenseal")


def available_adapters(names, threads: int, report: Callable[[str], None] = print) -> list:
    """Instances of the named, installed peers (``report`` is told about the missing ones)."""
    from hemx.errors import ParameterError

    out = []
    for name in names:
        if name not in ADAPTERS:
            raise ParameterError(f"unknown peer {name!r}; choose from {sorted(ADAPTERS)}")
        missing = ADAPTERS[name].available()
        if missing:
            report(f"peer {name}: {missing}; skipped")
            continue
        out.append(ADAPTERS[name](threads))
    return out
