"""Peer HE libraries timed beside hemx in the same process: desilofhe (CPU engine) and TenSEAL (SEAL).

Peers are optional (``pip install hemx[peers]``) and imported lazily: a missing peer is reported as such,
never an error. Each adapter builds the closest configuration it supports to a hemx parameter set (same N
where the peer allows it, the nearest log Q within the peer's own limits) and says what it built.

Operations (``None`` where the peer has no separate primitive):
``add``: ct + ct; ``mul``: ct x ct with relinearization, no rescale; ``rescale``; ``mul_rescale``: ct x ct,
relinearization and rescale; ``rotate``: rotation by one slot.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

OPS = ("add", "mul", "rescale", "mul_rescale", "rotate")


@dataclasses.dataclass
class PeerSetup:
    """What a peer built for one benchmark configuration."""

    name: str
    n: int
    levels: int
    log_q: float | None
    note: str
    ops: dict[str, Callable[[], object] | None]
    precision_bits: float | None = None


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

    def setup(self, n: int, levels: int) -> PeerSetup | None:
        import desilofhe

        # the engine picks N from max_level: walk from hemx's level count towards the level count giving N
        chosen, cand, seen = None, max(1, levels), set()
        while cand not in seen and 1 <= cand <= 64:
            seen.add(cand)
            eng = desilofhe.Engine(max_level=cand, mode="cpu", thread_count=self.threads)
            got = eng.slot_count * 2
            if got == n:
                chosen = (cand, eng)
                break
            cand = cand + 1 if got < n else cand - 1
        if chosen is None:
            return None
        max_level, e = chosen
        sk = e.create_secret_key()
        pk = e.create_public_key(sk)
        rk = e.create_relinearization_key(sk)
        rot = e.create_fixed_rotation_key(sk, 1)
        x = np.random.default_rng(1).uniform(-1, 1, e.slot_count)
        a, b = e.encrypt(x, pk), e.encrypt(x, pk)
        prec = _precision(x * x, e.decrypt(e.multiply(a, b, rk), sk))
        return PeerSetup(
            self.name, n, max_level, None,
            f"CPU engine, {self.threads} threads, max_level={max_level} (moduli not exposed); multiply() "
            "relinearizes and rescales",
            {
                "add": lambda: e.add(a, b),
                "mul": None,
                "rescale": None,
                "mul_rescale": lambda: e.multiply(a, b, rk),
                "rotate": lambda: e.rotate(a, rot),
            },
            prec,
        )


class TenSEALAdapter:
    """Microsoft SEAL through TenSEAL's ``sealapi`` evaluator (single-threaded per operation)."""

    name = "tenseal"
    MAX_LOG_QP = {1 << 12: 109, 1 << 13: 218, 1 << 14: 438, 1 << 15: 881}  # SEAL's 128-bit limits

    @staticmethod
    def available() -> str | None:
        try:
            import tenseal  # noqa: F401
        except Exception as exc:  # pragma: no cover
            return f"not installed ({type(exc).__name__})"
        return None

    def setup(self, n: int, levels: int) -> PeerSetup | None:
        import tenseal as ts
        import tenseal.sealapi as sa

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

        return PeerSetup(
            self.name, n, lv, float(sum(bits) - bits[-1]),
            f"SEAL via tenseal.sealapi, coeff_mod_bit_sizes={bits} (log QP {sum(bits)}, SEAL's 128-bit limit "
            f"{budget}), single-threaded",
            {"add": add, "mul": mul, "rescale": rescale, "mul_rescale": mul_rescale, "rotate": rotate},
            None,
        )


ADAPTERS = {"desilofhe": DesiloAdapter, "tenseal": TenSEALAdapter}
