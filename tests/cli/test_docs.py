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
    assert {"ckks.md", "circuits.md", "bootstrap.md", "kernels.md", "polymul.md", "io.md", "plan.md",
            "apps-cnn.md", "apps-logreg.md", "dataflow.md"} <= set(GUIDES)


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
