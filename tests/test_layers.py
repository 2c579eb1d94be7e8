"""hemx's imports go one way: down a stack of layers, and never around a cycle.

Each top-level subpackage of hemx is one layer. A module may import from its own layer and from the layers below
it, never from one above, so every layer can be read, tested and reused without the ones built on it. Lowest
first: errors (the exception types everything raises), nt (host-side number theory), kernels (the jit-able JAX
kernels on residue arrays, with the optional C++ kernels of kernels.native inside the layer), ring (RNS
polynomials), plan (NTT / key-switch planning, which ckks consults), parallel, ckks (the scheme), circuits
(bootstrapping and encrypted programs), dataflow, polymul, io / service, nn, apps, bench, demo / cli.
``hemx/__init__`` and ``hemx/__main__`` are the front over all of them; ``_version`` and ``allocator`` (the
process's malloc settings) are foundation helpers any layer may read; ``compilation_cache`` (imported by
``hemx/__init__``) sits just above ``plan``, whose cache directory it uses. :data:`LAYERS` below is the order the
test enforces.

Inside a layer the imports must form no cycle either (:func:`test_no_import_cycles`): the modules of a package
import one another in one direction, so a shared piece lives in a lower module that both import.

Every ``hemx/**/*.py`` is parsed with ``ast`` (so imports inside functions and ``TYPE_CHECKING`` blocks count too,
and nothing is imported).
"""

from __future__ import annotations

import ast
import collections
import pathlib
from typing import Iterable, Mapping

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "hemx"

# Lowest layer first; names in one tuple share a layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("_version", "allocator"),  # allocator: the process's malloc settings, imports nothing from hemx
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
    assert not unknown, f"add these hemx packages to LAYERS (and to the layer list of this file's docstring): {unknown}"


def test_no_module_imports_a_layer_above_its_own():
    violations = []
    for path in FILES:
        own = layer_of(module_name(path))
        for line, target in hemx_imports(path):
            other = layer_of(target)
            if RANK.get(other, -1) > RANK.get(own, -1):
                violations.append(f"{path.relative_to(ROOT.parent)}:{line} ({own}) imports {target} ({other})")
    assert not violations, "imports against the layer order:\n" + "\n".join(violations)


def import_graph(paths: Iterable[pathlib.Path]) -> dict[str, dict[str, str]]:
    """module -> {hemx module it imports: ``"file:line"`` of the first such import}, every import written in the
    files (inside functions too) resolved by :func:`hemx_imports`.

    Only written imports are edges. Python also initializes a package before any of its submodules, but that
    implicit step is no edge here: with it, every ``__init__`` that imports its own children would be a cycle.
    A submodule that *writes* an import of its own package's front (``from hemx.ckks import X`` inside
    ``hemx/ckks/context.py``) while that front imports it is a real cycle and is reported.
    """
    graph: dict[str, dict[str, str]] = {}
    for path in paths:
        edges = graph.setdefault(module_name(path), {})
        for line, target in hemx_imports(path):
            edges.setdefault(target, f"{path.relative_to(ROOT.parent)}:{line}")
    return graph


def import_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` that hold a cycle (two or more modules, or one importing
    itself), each sorted, in sorted order (Tarjan's algorithm, iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> tuple[str, Iterable[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return node, iter(sorted(graph.get(node, ())))

    for root in sorted(graph):
        if root in index:
            continue
        work = [visit(root)]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    work.append(visit(child))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:  # every child seen: close the node
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while not component or component[-1] != node:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.append(sorted(component))
    return sorted(found)


def example_cycle(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """A shortest import path from the component's first module back to itself, inside the component:
    ``[a, b, ..., a]``."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = collections.deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return path[::-1] + [start]
            if nxt in members and nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{component} holds no cycle")  # pragma: no cover - import_cycles returns cycles only


def describe_cycles(graph: Mapping[str, Mapping[str, str]]) -> list[str]:
    """One line per cyclic component: its modules, and one cycle through them with each import's file:line."""
    lines = []
    for component in import_cycles(graph):
        path = example_cycle(graph, component)
        hops = "".join(f" -> {b} ({graph[a][b]})" for a, b in zip(path, path[1:]))
        lines.append(f"{len(component)} module(s) {component}; e.g. {path[0]}{hops}")
    return lines


def test_no_import_cycles():
    """No two hemx modules import each other, however indirectly and wherever the import is written (a function
    body counts: it is the same dependency, taken later). Move the shared piece to a lower module both import."""
    cycles = describe_cycles(import_graph(FILES))
    assert not cycles, f"{len(cycles)} import cycle(s) in hemx:\n" + "\n".join(cycles)


def test_cycle_check_finds_a_cycle(monkeypatch):
    """The detector itself, on fabricated modules: two that import each other inside functions are one cycle,
    reported with its path and lines; a chain into the cycle, a self-import and an acyclic graph are told apart."""
    ntt, native = ROOT / "kernels" / "ntt.py", ROOT / "kernels" / "native" / "__init__.py"
    text = {ntt: "def f():\n    from hemx.kernels import native\n",
            native: "import numpy\n\n\ndef g():\n    from hemx.kernels.ntt import NTTPlan\n"}
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, encoding=None: text[self])
    graph = import_graph([ntt, native])
    assert import_cycles(graph) == [["hemx.kernels.native", "hemx.kernels.ntt"]]
    (line,) = describe_cycles(graph)
    assert line.endswith("e.g. hemx.kernels.native -> hemx.kernels.ntt (hemx/kernels/native/__init__.py:5) "
                         "-> hemx.kernels.native (hemx/kernels/ntt.py:2)"), line

    chain = {"a": {"b"}, "b": {"c"}, "c": {"d", "b"}, "d": set(), "e": {"e"}, "f": {"a"}}
    assert import_cycles(chain) == [["b", "c"], ["e"]]
    assert example_cycle(chain, ["b", "c"]) == ["b", "c", "b"] and example_cycle(chain, ["e"]) == ["e", "e"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    ring = {f"m{i}": {f"m{(i + 1) % 5}"} for i in range(5)} | {"m2": {"m3", "m0"}}
    assert import_cycles(ring) == [[f"m{i}" for i in range(5)]] and example_cycle(ring, ["m0"] + [
        f"m{i}" for i in range(1, 5)]) == ["m0", "m1", "m2", "m0"]


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
