"""Coverage-guided fuzz targets (atheris) for ``hemx.io.loads`` and the parameter constructor (issue 17).

Run: ``make fuzz`` (FUZZ_SECONDS per target, default 60), or directly::

    .venv/bin/python tests/io/fuzz_targets.py loads  -max_total_time=60 <work corpus dir> tests/fuzz_corpus/loads
    .venv/bin/python tests/io/fuzz_targets.py params -max_total_time=60 <work corpus dir> tests/fuzz_corpus/params

(the first corpus directory receives new inputs; pass a scratch folder there to keep the committed corpus small).
A finding is any input that ends in an exception other than a ``hemx.errors.HemxError``; atheris stops and writes
the input to ``crash-*``. ``tests/io/test_fuzz.py`` runs both targets for a few seconds in the suite, or replays
the committed corpus when atheris is not installed.

Input format of the ``loads`` target: byte 0 holds flags, the rest is serialized data.
  - bit 0: replace the trailing 32 bytes with the SHA-256 of the rest, so mutations get past the checksum and
    reach the header and residue validation (the committed seeds are real ``hemx.io.dumps`` outputs);
  - bit 1: load without a context (``context=None``);
  - bit 2: load with ``hemx.io.loads_secret_key`` instead of ``loads``;
  - bit 3: pass ``expect=hemx.Ciphertext``.
The ``params`` target decodes arguments for ``CKKSParameters.create``, ``CKKSParameters(...)`` or
``CKKSParameters.preset`` from the bytes (:func:`params_call`).

Known findings whose fix belongs inside ``hemx/ckks`` would be skipped by :func:`known_ckks_issue` (each with a
strict xfail case in ``tests/test_bad_input.py``); ``HEMX_FUZZ_STRICT=1`` reports them too. The list is empty
since issue 17 was fixed: every input runs and any exception other than a ``HemxError`` is a finding.
"""

from __future__ import annotations

import hashlib
import os
import sys
import warnings

os.environ.setdefault("HEMX_PLAN", "off")  # never time NTT variants for a fuzzed context

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

CORPUS = os.path.join(ROOT, "tests", "fuzz_corpus")
DIGEST = 32
STRICT = os.environ.get("HEMX_FUZZ_STRICT") == "1"

# small ring for the loads target: N = 2^4, 4 limbs (cheap to decode into)
FUZZ_LOG_N = 4
FUZZ_LEVELS = 1


def fix_checksum(data: bytes) -> bytes:
    if len(data) < DIGEST:
        return data
    body = data[:-DIGEST]
    return body + hashlib.sha256(body).digest()


_STATE: dict = {}


def fuzz_context():
    """(context, key set) the loads target loads into; built once."""
    if "ctx" not in _STATE:
        from tests.helpers.ckks_helpers import context_and_keys

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _STATE["ctx"] = context_and_keys(FUZZ_LOG_N, FUZZ_LEVELS, rotations=(1,), conjugation=True)
    return _STATE["ctx"]


def run_loads(data: bytes) -> None:
    """One input of the loads target; a HemxError is an accepted outcome, anything else propagates."""
    import hemx
    import hemx.io
    from hemx.errors import HemxError

    if not data:
        return
    flags, payload = data[0], bytes(data[1:])
    if flags & 1:
        payload = fix_checksum(payload)
    ctx, _ = fuzz_context()
    context = None if flags & 2 else ctx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if flags & 4:
                hemx.io.loads_secret_key(payload, context)
            else:
                hemx.io.loads(payload, context, expect=hemx.Ciphertext if flags & 8 else None)
        except HemxError:
            pass


# ---------------------------------------------------------------------------------------------- parameters

_PARAM_NAMES = ("log_n", "levels", "primes_per_level", "prime_bits", "base_bits", "special_bits", "dnum",
                "log_scale", "hamming_weight", "sigma", "allow_insecure", "name")
_CTOR_NAMES = ("log_n", "moduli", "level_sizes", "special_moduli", "dnum", "log_scale", "hamming_weight", "sigma",
               "allow_insecure", "name")
# sizes that keep one call fast: the constructor searches primes and builds nothing larger
_LIMITS = {"log_n": 12, "levels": 6, "special_bits": 31, "prime_bits": 31, "dnum": 20, "base_bits": 31}
_PRIMES = (12289, 40961, 65537, 786433, 7340033, 132120577, 469762049, 998244353, 2013265921, 2147473409)


class _Reader:
    """Minimal byte reader (the same decoding with or without atheris, so corpus replay is deterministic)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def int_(self, nbytes: int) -> int:
        return int.from_bytes(bytes(self.byte() for _ in range(nbytes)), "little", signed=True)


def _value(r: _Reader, name: str):
    """A fuzzed argument: mostly plausible values for ``name``, sometimes of the wrong type or range."""
    kind = r.byte() % 16
    lim = _LIMITS.get(name, 64)
    if kind <= 6:
        return r.byte() % (lim + 1)
    if kind == 7:
        return r.int_(2)
    if kind == 8:
        return r.int_(8)
    if kind == 9:
        return (float("inf"), float("-inf"), float("nan"), 1e300, -0.0, 0.5, 2.5, 1e-300)[r.byte() % 8]
    if kind == 10:
        return bool(r.byte() & 1)
    if kind == 11:
        return None
    if kind == 12:
        return ("", "12", "set_a", "x" * 3)[r.byte() % 4]
    if kind == 13:
        return tuple(_PRIMES[r.byte() % len(_PRIMES)] for _ in range(r.byte() % 5))
    if kind == 14:
        return tuple(r.byte() % 40 for _ in range(r.byte() % 5))
    return r.int_(1) + r.byte() / 256.0


def params_call(data: bytes):
    """Decode ``(function name, kwargs)`` for the params target from bytes."""
    r = _Reader(data)
    which = r.byte() % 3
    if which == 0:
        kwargs = {"log_n": _value(r, "log_n"), "levels": _value(r, "levels")}
        for name in _PARAM_NAMES[2:]:
            if r.byte() & 1:
                kwargs[name] = _value(r, name)
        return "create", kwargs
    if which == 1:
        kwargs = {}
        for name in _CTOR_NAMES:
            if name in ("log_n", "moduli", "level_sizes", "special_moduli", "dnum", "log_scale") or r.byte() & 1:
                kwargs[name] = _value(r, name)
        return "init", kwargs
    names = ("set_a", "set_b", "SET_A", "nope", "secure_12")
    kwargs = {"allow_insecure": bool(r.byte() & 1)}
    if r.byte() & 1:
        kwargs["levels"] = _value(r, "levels")
    return "preset", {"name": names[r.byte() % len(names)], **kwargs}


def known_ckks_issue(fn: str, kwargs: dict) -> str | None:
    """Why an input is a known, already-reported finding inside hemx/ckks, else None.

    Empty since issue 17 was fixed: the constructor, ``create`` and ``preset`` check every argument's type and
    range before the prime search, so every params input is run and any raw exception is a finding. Add an entry
    here (with its strict xfail case in ``tests/test_bad_input.py``) only for a new finding that cannot be fixed
    at once.
    """
    return None


KNOWN_SEEN: dict[str, int] = {}  # signature of each known ckks-side finding met -> count


def run_params(data: bytes) -> None:
    import hemx
    from hemx.errors import HemxError

    fn, kwargs = params_call(bytes(data))
    if not STRICT:
        why = known_ckks_issue(fn, kwargs)
        if why:  # skipped before the call: some of these search primes for a very long time
            KNOWN_SEEN[why] = KNOWN_SEEN.get(why, 0) + 1
            return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if fn == "create":
                hemx.CKKSParameters.create(kwargs.pop("log_n"), **kwargs)
            elif fn == "init":
                hemx.CKKSParameters(**kwargs)
            else:
                hemx.CKKSParameters.preset(**kwargs)
        except HemxError:
            pass
        # any other exception propagates: a finding (raw exceptions inside hemx/ckks are no longer tolerated)


TARGETS = {"loads": run_loads, "params": run_params}


def replay(target: str, paths) -> int:
    """Run every file of ``paths`` (files or folders) through a target without atheris; returns the count."""
    count = 0
    for path in paths:
        files = [os.path.join(path, f) for f in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
        for f in files:
            with open(f, "rb") as fh:
                TARGETS[target](fh.read())
            count += 1
    return count


def unseeded(keys):
    """An evaluation-key bundle with every switching key stored whole (the format-1 layout)."""
    import dataclasses

    strip = lambda k: dataclasses.replace(k, seed=None)  # noqa: E731
    return dataclasses.replace(keys, relin=None if keys.relin is None else strip(keys.relin),
                               galois={g: strip(k) for g, k in keys.galois.items()},
                               switching={n: strip(k) for n, k in keys.switching.items()})


def write_seeds(folder: str = CORPUS, only: tuple[str, ...] | None = None) -> list[str]:
    """(Re)write the committed seed corpus from real serialized objects of the fuzz context (``only``: these
    ``loads`` seeds by name, and no ``params`` seeds)."""
    import dataclasses

    import numpy as np

    import hemx.io

    ctx, keys = fuzz_context()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct = ctx.encrypt(np.linspace(-1, 1, ctx.slots), keys)
        objects = {
            "parameters": (2, hemx.io.dumps(ctx.params)),
            "context": (2, hemx.io.dumps(ctx)),
            "ciphertext": (1, hemx.io.dumps(ct, ctx)),
            "ciphertext_batch": (9, hemx.io.dumps(ctx.encrypt(np.ones((2, 3)), keys), ctx)),
            "ciphertext_level0": (1, hemx.io.dumps(ctx.drop_level(ct, 0), ctx)),
            "plaintext": (1, hemx.io.dumps(ctx.encode([1.5, -2.0]), ctx)),
            "public_key": (1, hemx.io.dumps(keys.public, ctx)),
            # format version 1 (whole keys) and 2 (seeded keys: b_d + the seed of a_d)
            "switching_key": (1, hemx.io.dumps(dataclasses.replace(keys.relin, seed=None), ctx)),
            "evaluation_keys": (1, hemx.io.dumps(unseeded(keys.evaluation_keys()), ctx)),
            "switching_key_seeded": (1, hemx.io.dumps(keys.galois[min(keys.galois)], ctx)),
            "evaluation_keys_seeded": (1, hemx.io.dumps(keys.evaluation_keys(), ctx)),
            "secret_key": (5, hemx.io.dumps_secret_key(keys.secret, ctx)),
        }
    written = []
    os.makedirs(os.path.join(folder, "loads"), exist_ok=True)
    for name, (flags, blob) in objects.items():
        if only is not None and name not in only:
            continue
        path = os.path.join(folder, "loads", f"{name}.bin")
        with open(path, "wb") as f:
            f.write(bytes([flags]) + blob)
        written.append(path)
    if only is not None:
        return written
    os.makedirs(os.path.join(folder, "params"), exist_ok=True)
    seeds = {  # create(log_n=4, levels=1) / the constructor with real primes / a preset
        "create": bytes([0, 0, 4, 0, 1]),
        "create_full": bytes([0, 0, 5, 0, 2, 1, 0, 2, 1, 0, 28, 0, 0, 1, 0, 31, 1, 0, 3, 1, 0, 40, 0, 0, 0]),
        "init": bytes([1, 0, 4, 13, 3, 8, 9, 14, 1, 1, 13, 2, 9, 8, 0, 1, 0, 30]),
        "preset": bytes([2, 1, 0, 0]),
    }
    for name, blob in seeds.items():
        path = os.path.join(folder, "params", f"{name}.bin")
        with open(path, "wb") as f:
            f.write(blob)
        written.append(path)
    return written


def main(argv) -> None:
    if len(argv) >= 2 and argv[1] == "seeds":
        print("\n".join(write_seeds()))
        return
    if len(argv) < 2 or argv[1] not in TARGETS:
        raise SystemExit(f"usage: {argv[0]} {{{'|'.join(TARGETS)}}} [libFuzzer options] [corpus dirs]")
    target = argv[1]
    import atheris

    with atheris.instrument_imports(include=["hemx"]):
        import hemx  # noqa: F401
        import hemx.io  # noqa: F401
        import hemx.ckks.params  # noqa: F401
    if target == "loads":
        fuzz_context()
    atheris.Setup([argv[0]] + argv[2:], TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
