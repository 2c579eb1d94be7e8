"""The Python examples in the guides run and their assertions hold."""

import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks(name: str) -> list[str]:
    return BLOCK.findall((DOCS / name).read_text(encoding="utf-8"))


GUIDES = sorted(p.name for p in DOCS.glob("*.md") if BLOCK.search(p.read_text(encoding="utf-8")))


def test_every_guide_with_code_is_run():
    """Every guide's Python blocks run below; the guides the README names all have examples."""
    assert {"ckks.md", "compare-peers.md", "circuits.md", "bootstrap.md", "kernels.md", "polymul.md", "io.md",
            "plan.md", "apps-cnn.md", "apps-logreg.md", "dataflow.md", "nn.md", "jit.md"} <= set(GUIDES)


@pytest.mark.parametrize("name", GUIDES)
def test_guide_examples_run(name):
    blocks = _blocks(name)
    assert blocks, f"{name} has no python examples"
    for i, code in enumerate(blocks):
        exec(compile(code, f"{name}[{i}]", "exec"), {"__name__": f"docs_{i}"})


def test_readme_example_runs():
    text = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert blocks
    for i, code in enumerate(blocks):
        exec(compile(code, f"README[{i}]", "exec"), {"__name__": f"readme_{i}"})


PEER_BLOCK = re.compile(r"```python (tenseal|desilofhe)\n(.*?)```", re.S)


def _code_lines(code: str) -> int:
    return sum(1 for line in code.splitlines() if line.strip() and not line.strip().startswith("#"))


def test_peer_examples_run_and_are_counted():
    """docs/compare-peers.md: the TenSEAL and desilofhe programs run where those packages are installed, and the
    table's line counts are the blocks' own (non-blank, non-comment lines)."""
    text = (DOCS / "compare-peers.md").read_text(encoding="utf-8")
    counts = {"hemx": _code_lines(_blocks("compare-peers.md")[0])}
    peers = PEER_BLOCK.findall(text)
    assert [name for name, _ in peers] == ["tenseal", "desilofhe"]
    for name, code in peers:
        counts[name] = _code_lines(code)
    row = re.search(r"\| lines \(code, imports and checks included\) \| (\d+) \| (\d+) \| (\d+) \|", text)
    assert row, "the side-by-side table's lines row is missing"
    assert tuple(int(v) for v in row.groups()) == (counts["hemx"], counts["tenseal"], counts["desilofhe"])
    missing = []
    for name, code in peers:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
            continue
        exec(compile(code, f"compare-peers.md[{name}]", "exec"), {"__name__": f"docs_peer_{name}"})
    if missing:
        pytest.skip(f"not installed: {missing} (pip install hemx[peers])")
