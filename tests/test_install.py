"""What a user installing without the Makefile meets (issue 22, point 1)."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers import cli

ROOT = Path(__file__).resolve().parents[1]


def test_demo_without_torch_says_so_before_running_anything(home, tmp_path, monkeypatch):
    hidden = tmp_path / "no_torch"
    hidden.mkdir()
    # sys.modules["torch"] = None makes `import torch` fail and find_spec("torch") None,
    # as in an environment where `pip install .` left torch out
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    monkeypatch.setenv("PYTHONPATH", str(hidden))
    result = cli("demo")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs" not in result.stdout and "running" not in result.stdout  # nothing ran
    assert "torch is not installed" in result.stderr and "pip install" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # one message, wrapped at most once


def test_the_readme_says_how_labcoat_gets_on_path_before_its_first_command():
    """After `make demo`, `labcoat` lives in .venv/bin: the README says so before the first
    command that calls it bare (issue 22, point 1)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    before = text[:text.index("\nlabcoat lint design.yaml")]  # the first bare command
    assert "source .venv/bin/activate" in before and ".venv/bin/labcoat" in before
    assert before.index("source .venv/bin/activate") < before.index("## Install without")


def test_the_all_extra_holds_every_user_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    users = sorted(set(extras) - {"all", "dev", "docs"})  # docs builds the manual
    assert extras["all"] == [f"labcoat[{','.join(users)}]"]


# --- a real install: a built wheel in a fresh venv without torch (issue 22, point 1) ---

# pip's words when an index cannot be reached (no network, PyPI down); anything else is a bug
UNREACHABLE = ("from versions: none", "No matching distribution found", "NewConnectionError",
               "Failed to establish a new connection", "Temporary failure in name resolution",
               "Network is unreachable", "ConnectTimeoutError", "ReadTimeoutError")
CORE_ONLY = {"torch", "plotly", "fastapi", "uvicorn", "ray", "submitit", "psycopg"}


def _pip(python: Path, *args: str) -> None:
    """pip ARGS for the venv of `python` (this venv's pip, so the new venv needs no pip of
    its own, 3 s less; pip's cache reused); skip when the package index is unreachable. Not
    with this process's PYTHONPATH (seen: with labcoat's src/ on it, the new venv's
    `import labcoat` failed after the install)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args,
                           "--timeout", "30", "--retries", "1", "--quiet"],
                          capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        said = done.stdout + done.stderr
        why = next((line.strip() for line in said.splitlines()
                    if any(sign in line for sign in UNREACHABLE)), None)
        if why:
            pytest.skip("a clean install needs labcoat's build and core dependencies from the "
                        f"package index, which pip could not reach: {why}")
        raise AssertionError(f"pip {' '.join(args)} failed:\n{said}")


def _readme_file(name: str) -> str:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"<!-- file: {name} -->") + 2  # the marker, then the fence
    return "\n".join(lines[start:lines.index("```", start)]) + "\n"


def test_a_built_wheel_in_a_fresh_venv_without_torch(tmp_path):
    """`pip install` of a wheel into a new venv brings only the core dependencies: `--help`
    works, `labcoat demo` refuses in one line naming the extra before anything runs, and the
    README's quick start (a torch-free script) runs, lints and reports. ~20 s with pip's
    cache warm (the wheel build, a venv, ~25 small wheels)."""
    source = tmp_path / "source"  # a copy: the build writes build/ and *.egg-info beside it
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    _pip(python, "wheel", str(source), "--no-deps", "--wheel-dir", str(tmp_path / "dist"))
    wheel = next((tmp_path / "dist").glob("labcoat-*.whl"))
    _pip(python, "install", "--no-compile", str(wheel))  # compiles only what is imported

    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "list",
                                "--format=json"], capture_output=True, text=True,
                               check=True).stdout
    names = {p["name"].lower() for p in json.loads(installed)}
    assert "labcoat" in names and not names & CORE_ONLY, sorted(names & CORE_ONLY)

    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LABCOAT_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", TMPDIR=str(tmp_path / "tmp"),
               LABCOAT_HOME=str(work / ".labcoat"))

    def labcoat(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / "labcoat"), *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)

    found = subprocess.run([str(python), "-c", "import importlib.util as u, labcoat; "
                            "print(u.find_spec('torch') is None, labcoat.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert found.stdout.split()[0] == "True", found.stdout  # no torch leaks in
    assert found.stdout.split()[1].startswith(str(venv)), found.stdout  # the wheel, not src/

    helped = labcoat("--help")
    assert helped.returncode == 0 and "demo" in helped.stdout, helped.stdout + helped.stderr

    demo = labcoat("demo")
    assert demo.returncode != 0
    assert "Traceback" not in demo.stdout + demo.stderr
    assert demo.stdout == ""  # nothing ran: no "running ...", no trial line
    assert len(demo.stderr.strip().splitlines()) <= 2, demo.stderr  # one message
    assert "torch is not installed" in demo.stderr and "labcoat[torch]" in demo.stderr
    assert not list((tmp_path / "tmp").iterdir())  # not even the demo's temporary home

    # "A bare `pip install .` is enough for designs, stats and reports" (README)
    (work / "train.py").write_text(_readme_file("train.py"))
    (work / "design.yaml").write_text(_readme_file("design.yaml"))
    for args in (("lint", "design.yaml"), ("run", "design.yaml", "--plain"),
                 ("report", "quick-warmup")):
        done = labcoat(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stdout,
                                                                        done.stderr)
    assert "Verdict" in done.stdout
    html = labcoat("report", "quick-warmup", "--html", "report.html")
    assert html.returncode != 0 and "Traceback" not in html.stderr
    assert "labcoat[ui]" in html.stderr and len(html.stderr.strip().splitlines()) <= 2
