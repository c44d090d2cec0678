"""docs/python.md runs as written: every ```python block is executed, in order, each in a
fresh namespace (the blocks carry their own asserts)."""
import re

import pytest

from conftest import SOURCE_DIR


def _blocks(source_dir):
    text = (source_dir / "docs" / "python.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_guide_has_code(source_dir):
    assert len(_blocks(source_dir)) >= 4


@pytest.mark.parametrize("index", range(len(_blocks(SOURCE_DIR))))
def test_guide_block_runs(source_dir, index):
    blocks = _blocks(source_dir)
    exec(compile(blocks[index], f"docs/python.md block {index}", "exec"), {})
