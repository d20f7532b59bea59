"""The examples in docs/integrations-*.md are the scripts and designs these tests run."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


def _file_blocks(page: Path) -> dict[str, str]:
    """{PATH: code} of the page's `<!-- file: PATH -->` blocks."""
    lines, found = page.read_text().splitlines(), {}
    for i, line in enumerate(lines):
        if line.startswith("<!-- file: "):
            name = line.removeprefix("<!-- file: ").removesuffix(" -->").strip()
            end = lines.index("```", i + 2)
            found[name] = "\n".join(lines[i + 2:end]) + "\n"
    return found


@pytest.mark.parametrize("page, names", [
    ("integrations-transformers.md", ("hf_chars.py", "hf_design.yaml")),
    ("integrations-lightning.md", ("pl_chars.py", "pl_design.yaml")),
])
def test_the_docs_show_the_tested_files_verbatim(page, names):
    blocks = _file_blocks(ROOT / "docs" / page)
    for name in names:
        assert blocks[name] == (HERE / name).read_text(), f"{page}: {name} differs from the test's"
