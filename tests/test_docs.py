"""The Python examples in the guides run and their assertions hold."""

import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks(name: str) -> list[str]:
    return BLOCK.findall((DOCS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["ckks.md", "kernels.md", "polymul.md", "io.md", "plan.md"])
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
