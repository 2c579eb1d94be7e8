"""JAX's persistent compilation cache, switched on for hemx by default.

Most of a fresh process's first encrypted operation is XLA compilation. JAX can keep compiled programs on disk
(keyed on the program, the compile options, the backend and the jax / jaxlib versions) and load them in later
processes instead of compiling again; hemx turns that on when it is imported:

* directory: ``<hemx cache dir>/jax-compilation``, beside the planner's ``plans.json`` (``$HEMX_CACHE_DIR``,
  else ``$XDG_CACHE_HOME/hemx``, else ``~/.cache/hemx``; see :mod:`hemx.plan.cache`);
* thresholds: every program is written, however short its compilation (``jax_persistent_cache_min_compile_time_secs
  = 0``, JAX's default is 1 s) and whatever its size (``jax_persistent_cache_min_entry_size_bytes = -1``): hemx's
  programs are many small ones (one per operation, level and shape) whose compile times add up;
* hemx leaves JAX alone when the user configured its cache already (``$JAX_COMPILATION_CACHE_DIR``, or
  ``jax.config.update("jax_compilation_cache_dir", ...)`` before importing hemx), when JAX's cache is switched
  off (``jax_enable_compilation_cache`` false), or when ``HEMX_COMPILATION_CACHE=0``. A threshold the user set
  (its ``JAX_...`` environment variable, or a value other than JAX's default) is kept as well.

:func:`status` says what was decided and why; ``hemx info`` prints it, ``hemx cache clear`` empties the directory.
The cache is trusted input: a process loads whatever executables it finds there, so the directory must not be
writable by other users (it is created with the user's default permissions under their own cache directory).
"""

from __future__ import annotations

import dataclasses
import os
import shutil

from hemx.errors import ParameterError

ENV_SWITCH = "HEMX_COMPILATION_CACHE"
DIR_NAME = "jax-compilation"
MIN_COMPILE_TIME_S = 0.0
MIN_ENTRY_SIZE_BYTES = -1  # JAX: "-1 disables the size restriction and prevents overrides"

_OFF = ("0", "off", "false", "no")
_ON = ("", "1", "on", "true", "yes")
# JAX's defaults for the thresholds (jax/_src/config.py of jax 0.10); hemx only replaces these values
_JAX_DEFAULTS = {"jax_persistent_cache_min_compile_time_secs": 1.0, "jax_persistent_cache_min_entry_size_bytes": 0}
_HEMX_VALUES = {"jax_persistent_cache_min_compile_time_secs": MIN_COMPILE_TIME_S,
                "jax_persistent_cache_min_entry_size_bytes": MIN_ENTRY_SIZE_BYTES}


@dataclasses.dataclass(frozen=True)
class CacheStatus:
    """What :func:`configure` decided.

    Attributes:
        enabled: whether JAX writes and reads a persistent cache in this process.
        directory: the cache directory JAX uses (None when disabled).
        managed_by: "hemx" (hemx set it up), "user" (JAX's cache configured outside hemx), or "off".
        reason: one sentence for people (``hemx info``).
    """

    enabled: bool
    directory: str | None
    managed_by: str
    reason: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


_status: CacheStatus | None = None


def default_directory() -> str:
    """hemx's compilation cache directory: ``jax-compilation`` in the hemx cache directory."""
    from hemx.plan.cache import cache_dir

    return os.path.join(cache_dir(), DIR_NAME)


def requested(environ=None) -> bool:
    """Whether ``$HEMX_COMPILATION_CACHE`` asks for the cache (unset: yes). Raises ParameterError on other values."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_SWITCH, "")
    value = raw.strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ParameterError(f"${ENV_SWITCH} must be 0 or 1 (also off/on, false/true, no/yes), got {raw!r}")


def configure(environ=None) -> CacheStatus:
    """Turn JAX's persistent compilation cache on in :func:`default_directory` unless the user decided otherwise.

    Called by ``import hemx``. JAX opens its cache once per process, so once hemx has enabled it, later calls
    return that decision unchanged; otherwise they re-read the environment and JAX's configuration. Only
    thresholds still at JAX's defaults are changed (see the module docstring).

    Args:
        environ: the environment to read (default ``os.environ``); JAX's own configuration is read from ``jax``.

    Returns:
        The :class:`CacheStatus`, also kept for :func:`status`.
    """
    global _status
    import jax

    current = jax.config.jax_compilation_cache_dir
    if _status is not None and _status.managed_by == "hemx" and current == _status.directory:
        return _status
    env = os.environ if environ is None else environ
    wanted = requested(env)
    if not jax.config.jax_enable_compilation_cache:
        status = CacheStatus(False, None, "off", "JAX's compilation cache is switched off "
                                                 "(jax_enable_compilation_cache is False)")
    elif current:
        where = ("$JAX_COMPILATION_CACHE_DIR" if env.get("JAX_COMPILATION_CACHE_DIR") == current
                 else "jax_compilation_cache_dir")
        status = CacheStatus(True, str(current), "user", f"configured outside hemx ({where}); hemx leaves it as is")
    elif not wanted:
        status = CacheStatus(False, None, "off", f"disabled by ${ENV_SWITCH}={env.get(ENV_SWITCH)}")
    else:
        directory = default_directory()
        for name, value in _HEMX_VALUES.items():
            if env.get(name.upper()) is None and getattr(jax.config, name) == _JAX_DEFAULTS[name]:
                jax.config.update(name, value)
        jax.config.update("jax_compilation_cache_dir", directory)
        status = CacheStatus(True, directory, "hemx", f"enabled by hemx; {ENV_SWITCH}=0 switches it off")
    _status = status
    return status


def status() -> CacheStatus:
    """The decision of the last :func:`configure` (``import hemx`` made one)."""
    return _status if _status is not None else configure()


def usage(directory: str | None) -> tuple[int, int]:
    """``(entries, bytes)`` of a JAX cache directory: its ``*-cache`` files and all its files' sizes."""
    entries = size = 0
    if not directory or not os.path.isdir(directory):
        return 0, 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                size += os.path.getsize(os.path.join(root, name))
            except OSError:  # removed meanwhile by another process
                continue
            entries += name.endswith("-cache")
    return entries, size


def clear(directory: str | None = None) -> int:
    """Delete hemx's compilation cache directory (default :func:`default_directory`); returns the bytes freed.

    Programs already loaded in running processes are unaffected; the next process compiles again.
    """
    directory = directory or default_directory()
    _, size = usage(directory)
    if os.path.isdir(directory):
        shutil.rmtree(directory, ignore_errors=True)
    return size


__all__ = ["CacheStatus", "ENV_SWITCH", "DIR_NAME", "MIN_COMPILE_TIME_S", "MIN_ENTRY_SIZE_BYTES", "configure",
           "status", "default_directory", "requested", "usage", "clear"]
