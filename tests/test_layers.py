"""The one-way layering of DESIGN.md §2: a module of hemx imports only from its own layer or the layers below it.

Every ``hemx/**/*.py`` is parsed with ``ast`` (so imports inside functions and ``TYPE_CHECKING`` blocks count too,
and nothing is imported); each module is mapped to its layer by its top-level subpackage. Layers, lowest first:
errors, nt, kernels (kernels.native inside it), ring, plan (imported by ckks), parallel, ckks, circuits, dataflow,
polymul, io/service, apps, bench, demo/cli. ``hemx/__init__`` and ``hemx/__main__`` are the front over all of them;
``_version`` is a foundation helper any layer may read; ``compilation_cache`` (imported by ``hemx/__init__``)
sits just above ``plan``, whose cache directory it uses.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "hemx"

# Lowest layer first; names in one tuple share a layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("_version",),
    ("nt",),
    ("kernels",),
    ("ring",),
    ("plan",),
    ("compilation_cache",),  # reads hemx.plan.cache's directory; imported by hemx/__init__, bench and cli
    ("parallel",),
    ("ckks",),
    ("circuits",),
    ("dataflow",),
    ("polymul",),
    ("io", "service"),
    ("nn",),
    ("apps",),
    ("bench",),
    ("demo", "cli"),
    ("__init__", "__main__"),  # the package front: ``import hemx`` / ``from hemx import X``
)
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """``hemx.ckks.context`` -> ``ckks``; ``hemx`` -> ``__init__``."""
    parts = module.split(".")
    assert parts[0] == "hemx", module
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def hemx_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, imported hemx module) for every import in the file, relative imports resolved.

    ``from hemx import ckks`` names the submodule ``hemx.ckks``; ``from hemx import Context`` names ``hemx`` itself.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "hemx"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "hemx":
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                # ``from pkg import sub``: the submodule when it exists as a file/package, else the attribute of pkg
                rel = pathlib.Path(*candidate.split(".")[1:])
                is_module = (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()
                found.append((node.lineno, candidate if is_module else target))
    return found


FILES = sorted(ROOT.rglob("*.py"))


def test_every_module_has_a_layer():
    unknown = sorted({layer_of(module_name(p)) for p in FILES} - RANK.keys())
    assert not unknown, f"add these hemx packages to LAYERS (and to DESIGN.md §2): {unknown}"


def test_no_module_imports_a_layer_above_its_own():
    violations = []
    for path in FILES:
        own = layer_of(module_name(path))
        for line, target in hemx_imports(path):
            other = layer_of(target)
            if RANK.get(other, -1) > RANK.get(own, -1):
                violations.append(f"{path.relative_to(ROOT.parent)}:{line} ({own}) imports {target} ({other})")
    assert not violations, "imports against the layer order:\n" + "\n".join(violations)


@pytest.mark.parametrize("source, module, expected", [
    ("from ..kernels import ntt", "hemx/ring/rns.py", "hemx.kernels.ntt"),
    ("from . import params", "hemx/ckks/__init__.py", "hemx.ckks.params"),
    ("from .params import X", "hemx/ckks/context.py", "hemx.ckks.params"),
    ("from hemx import Context", "hemx/apps/cnn.py", "hemx"),
    ("import hemx.nt.primes", "hemx/kernels/ntt.py", "hemx.nt.primes"),
])
def test_import_resolution(monkeypatch, source, module, expected):
    """The resolver itself: relative imports and ``from hemx import`` name the right module (else the layer check
    above could pass by resolving every import to something harmless)."""
    fake = ROOT.parent / module
    text = {fake: source}
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, encoding=None: text[self])
    assert [t for _, t in hemx_imports(fake)] == [expected]


def test_layer_check_sees_imports_inside_functions(monkeypatch):
    fake = ROOT / "kernels" / "ntt.py"
    src = "def f():\n    from hemx.ckks import context\n    return context\n"
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, encoding=None: src)
    (line, target), = hemx_imports(fake)
    assert line == 2 and RANK[layer_of(target)] > RANK["kernels"]


def test_suite_runner_covers_every_test_file():
    """``make test`` runs tests/run_suite.py's groups: every test file must be in exactly one of them."""
    import pathlib

    from tests.run_suite import GROUPS

    root = pathlib.Path(__file__).resolve().parent
    covered = [root.parent / p for group in GROUPS for p in group.paths]
    assert all(c.exists() for c in covered), [str(c) for c in covered if not c.exists()]
    for path in root.rglob("test_*.py"):
        holders = [c for c in covered if path == c or c in path.parents]
        assert len(holders) == 1, f"{path} is in {len(holders)} groups of run_suite.py (must be in exactly one)"
