"""The planner's wisdom file: measured variant timings per machine and shape, kept between runs.

Location: ``$HEMX_CACHE_DIR/plans.json``, else ``$XDG_CACHE_HOME/hemx/plans.json``, else
``~/.cache/hemx/plans.json``. The file is one JSON object::

    {"format": 1, "entries": {"<key>": {"key": {...}, "timings": {...}, "skipped": {...}, "failed": {...},
                                         "updated_utc": "..."}}}

An entry's key names the backend, device kind, host (CPU model and core count), the jax / jaxlib / hemx
versions and the timed shape, so a choice made on one machine or version is never reused on another. Writes
are atomic (a temporary file renamed over the old one) and merge with what other processes wrote meanwhile.
A file that cannot be parsed is ignored with a :class:`PlanCacheWarning` and rewritten on the next store; a
directory that cannot be written is reported once the same way and planning goes on in memory.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import platform
import tempfile
import warnings
from typing import Any

FORMAT = 1
FILE_NAME = "plans.json"


class PlanCacheWarning(UserWarning):
    """The plan cache file was unreadable or unwritable; planning continues without it."""


def cache_dir() -> str:
    """Directory of the plan cache (see the module docstring for the order of precedence)."""
    explicit = os.environ.get("HEMX_CACHE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hemx")


def cache_path() -> str:
    """Full path of the plan cache file."""
    return os.path.join(cache_dir(), FILE_NAME)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=None)
def _environment() -> tuple:
    import importlib.metadata

    import jax

    from hemx._version import __version__

    devices = jax.devices()
    try:
        jaxlib_version = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - unusual installs
        jaxlib_version = "?"
    return (
        ("backend", jax.default_backend()),
        ("device_kind", str(devices[0].device_kind) if devices else "?"),
        ("device_count", len(devices)),
        ("host", f"{cpu_model()} x{os.cpu_count()}"),
        ("jax", jax.__version__),
        ("jaxlib", jaxlib_version),
        ("hemx", __version__),
    )


def environment_key() -> dict[str, Any]:
    """Backend, device kind, host and library versions, and the native library's build (a hash of the file,
    "none" when it is unavailable or disabled) with the instruction set it runs (a plan timed with the kernels
    forced to ``scalar`` must not serve ``avx512`` runs): the machine half of every cache key."""
    from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

    build = native.build_id()
    return dict(_environment(), native=build if build == "none" else f"{build}/{native.isa()}")


def entry_key(shape: dict[str, Any], env: dict[str, Any] | None = None) -> str:
    """The cache key string of one timed shape on this machine (sorted JSON, so it is stable)."""
    return json.dumps({**(env if env is not None else environment_key()), **shape}, sort_keys=True)


def _empty() -> dict:
    return {"format": FORMAT, "entries": {}}


def _valid(doc: Any) -> bool:
    return (isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("entries"), dict)
            and all(isinstance(v, dict) for v in doc["entries"].values()))


def load(path: str | None = None) -> dict:
    """The whole cache document; an empty one when the file is missing, or corrupted (with a warning)."""
    path = path or cache_path()
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (FileNotFoundError, NotADirectoryError):
        return _empty()
    except (OSError, ValueError) as exc:
        warnings.warn(f"ignoring the unreadable plan cache {path} ({type(exc).__name__}: {exc}); it will be "
                      "rewritten", PlanCacheWarning, stacklevel=3)
        return _empty()
    if not _valid(doc):
        warnings.warn(f"ignoring the plan cache {path}: not a hemx plan file of format {FORMAT}; it will be "
                      "rewritten", PlanCacheWarning, stacklevel=3)
        return _empty()
    return doc


def lookup(key: str, path: str | None = None) -> dict | None:
    """The entry stored under ``key``, or None."""
    return load(path)["entries"].get(key)


_warned_unwritable: set[str] = set()


def store(key: str, entry: dict, path: str | None = None) -> bool:
    """Merge ``entry`` into the file under ``key`` (atomic replace). Returns False when it could not write."""
    path = path or cache_path()
    entry = dict(entry, updated_utc=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    try:
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        with warnings.catch_warnings():  # a corrupted file was already reported by the lookup
            warnings.simplefilter("ignore", PlanCacheWarning)
            doc = load(path)
        doc["entries"][key] = entry
        fd, tmp = tempfile.mkstemp(prefix=".plans-", suffix=".json", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as exc:
        if path not in _warned_unwritable:
            _warned_unwritable.add(path)
            warnings.warn(f"cannot write the plan cache {path} ({exc}); plans are kept in memory only",
                          PlanCacheWarning, stacklevel=3)
        return False
    return True


def reset(path: str | None = None) -> bool:
    """Delete the cache file; returns True when there was one."""
    path = path or cache_path()
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


__all__ = ["PlanCacheWarning", "cache_dir", "cache_path", "environment_key", "entry_key", "load", "lookup",
           "store", "reset", "FORMAT"]
