"""The import contract of docs/architecture.md, checked on every `make test`.

import-linter checks the layers and the forbidden imports (pyproject.toml,
[tool.importlinter]); the AST check below adds what it cannot express: no module
imports another package's private `_module`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import labcoat

SRC = Path(labcoat.__file__).parent
ROOT = SRC.parent.parent


def test_the_import_contract_holds():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-logo", "--no-cache"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _imported(path: Path, src: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every labcoat import in the file, relative ones resolved."""
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    package = parts[:-1]  # a module's package; an __init__ is its package's
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + [base]).rstrip(".")
            names = [f"{base}.{a.name}" for a in node.names]
            out += [(node.lineno, base), *((node.lineno, n) for n in names)]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, m) for line, m in out if m.startswith("labcoat.")]


def private_imports(src: Path) -> list[str]:
    """Imports of another package's private module (labcoat.P._m from outside P)."""
    found = []
    for path in sorted(src.rglob("*.py")):
        own = path.relative_to(src).parts[0].removesuffix(".py")
        for line, module in _imported(path, src):
            parts = module.split(".")
            if (len(parts) > 2 and parts[1] != own and parts[2].startswith("_")
                    and not parts[2].startswith("__")):
                found.append(f"{path.relative_to(src.parent)}:{line} imports "
                             f"{'.'.join(parts[:3])}")
    return sorted(set(found))


def test_no_package_imports_another_packages_private_modules():
    assert private_imports(SRC) == []


def test_the_private_import_check_sees_a_planted_one(tmp_path):
    pkg = tmp_path / "labcoat"
    (pkg / "report").mkdir(parents=True)
    (pkg / "report" / "_x.py").write_text("from labcoat.store._models import utcnow\n"
                                          "from labcoat.report._y import z\n"
                                          "from ._y import w\n")
    assert private_imports(pkg) == ["labcoat/report/_x.py:1 imports labcoat.store._models"]


def test_every_package_loads_from_a_bare_import_labcoat():
    code = ("import labcoat, sys; assert 'scipy' not in sys.modules; "
            "print(labcoat.scaling.fit.__name__, labcoat.stats.interval_estimates.__name__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["fit", "interval_estimates"]


@pytest.mark.needs("torch")
def test_a_training_process_does_not_load_scipy_or_the_store():
    """Every tinylm trial imports labcoat.torch (guard, phases); scipy.stats (0.7 s) and
    SQLAlchemy are for the runner and the reports, not for each training process."""
    code = ("import sys, labcoat.workloads.tinylm; "
            "print(sorted(m for m in ('scipy', 'sqlalchemy') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]"]
