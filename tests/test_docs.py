"""The documentation builds strictly, and every example in README.md and docs/*.md runs.

Each page is followed as a reader would: its fenced blocks run in order in one
fresh directory (with LABCOAT_HOME inside it), python blocks in one
interpreter (a later block sees an earlier block's names), bash blocks with
the venv's `labcoat` first on PATH: a shim that runs each call as a process forked from a
server with the heavy libraries imported (tests/cli_forks.py; the venv's own script with
LABCOAT_TEST_FORK=0). Markers on the line above a block:

    <!-- not-run: why -->      the block is shown, not run (say why)
    <!-- file: PATH -->        the block is a file the reader saves as PATH

yaml blocks must parse; blocks without a language (output shapes) are text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)\s*$")
MARKER = re.compile(r"^<!--\s*(not-run|file):\s*(.+?)\s*-->$")
SHELL = {"bash", "sh", "shell", "console"}
RUN_TIMEOUT_S = 240


def blocks(page: Path) -> list[dict]:
    """Fenced blocks of `page`: language, code, 1-based line of the fence, marker."""
    found, lines, i = [], page.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARKER.match(before.strip())
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{page.name}:{i + 1}: code block never closed"
        found.append({"lang": opening[1], "code": "\n".join(lines[i + 1:end]) + "\n",
                      "line": i + 1, "mark": mark[1] if mark else None,
                      "arg": mark[2] if mark else None})
        i = end + 1
    return found


def runnable(page: Path) -> list[dict]:
    return [b for b in blocks(page) if b["mark"] == "file"
            or (b["mark"] is None and (b["lang"] == "python" or b["lang"] in SHELL))]


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


IMPORT = re.compile(r"^\s*(?:import|from)\s+([\w.]+)", re.M)
NEEDS_TORCH = ("labcoat.torch", "labcoat.workloads", "labcoat.integrations")


def missing_modules(page: Path) -> list[str]:
    """Modules a page's python examples import that this install lacks (an extra), so
    the page is skipped, not failed, without e.g. the hf or lightning extra."""
    from importlib.util import find_spec

    code = "".join(b["code"] for b in runnable(page)
                   if b["lang"] == "python" or str(b["arg"]).endswith(".py"))
    names = {n.split(".")[0] for n in IMPORT.findall(code) if n.split(".")[0] != "labcoat"}
    if any(n.startswith(NEEDS_TORCH) for n in IMPORT.findall(code)):
        names.add("torch")
    return sorted(n for n in names if find_spec(n) is None)


def test_no_example_run_installs_packages() -> None:
    """An example that ran `pip install` would change the test venv under the rest of the
    suite (`pip install 'labcoat[hf]'` once put drain3's cachetools pin back, breaking
    MLflow's import in later tests): such blocks are `not-run`."""
    for page in PAGES:
        for block in runnable(page):
            if block["lang"] in SHELL:
                assert not re.search(r"\bpip\b.*\binstall\b", block["code"]), \
                    f"{page.name}:{block['line']}: mark this block <!-- not-run: ... -->"


@pytest.fixture(scope="module")
def cli_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """PATH (and the socket) for the pages' `labcoat`: the fork server's shim, first."""
    venv = str(Path(sys.executable).parent)
    if os.environ.get("LABCOAT_TEST_FORK", "1") == "0":
        yield {"PATH": f"{venv}{os.pathsep}{os.environ.get('PATH', '')}"}
        return
    import cli_forks

    where = tmp_path_factory.mktemp("cli")
    socket = str(where / "cli.sock")
    server = subprocess.Popen([sys.executable, cli_forks.__file__, "--socket", socket],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline() == "ready\n", "the CLI fork server did not start"
        cli_forks.shim(str(where))
        yield {"PATH": os.pathsep.join([str(where), venv, os.environ.get("PATH", "")]),
               "LABCOAT_TEST_CLI_SOCKET": socket}
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=_page_id)
def test_examples_run(page: Path, tmp_path: Path, cli_path: dict[str, str]) -> None:
    missing = missing_modules(page)
    if missing:
        pytest.skip(f"{page.name} needs {', '.join(missing)} (an extra of labcoat)")
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps({"page": _page_id(page), "blocks": runnable(page)}))
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABCOAT_")}
    env.update(LABCOAT_HOME=str(work / ".labcoat"), EDITOR="true", OMP_NUM_THREADS="1",
               GIT_AUTHOR_NAME="docs", GIT_AUTHOR_EMAIL="docs@example.invalid",
               GIT_COMMITTER_NAME="docs", GIT_COMMITTER_EMAIL="docs@example.invalid",
               GIT_CONFIG_GLOBAL=str(tmp_path / "gitconfig"), PYTHONUNBUFFERED="1",
               **cli_path)
    code, out, err = _run_page_process(spec, work, env)
    assert code == 0, f"{page.name}: an example failed\n{out[-6000:]}\n{err[-6000:]}"


def _run_page_process(spec: Path, work: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """`python tests/test_docs.py SPEC` in `work`: forked from the CLI server where there is
    one (its imports done once), else a fresh interpreter."""
    if "LABCOAT_TEST_CLI_SOCKET" not in env:
        done = subprocess.run([sys.executable, __file__, str(spec)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        return done.returncode, done.stdout, done.stderr
    import cli_forks

    out, err = spec.with_suffix(".out"), spec.with_suffix(".err")
    code = cli_forks.run_script(env["LABCOAT_TEST_CLI_SOCKET"], __file__, [str(spec)],
                                str(work), env, RUN_TIMEOUT_S, str(out), str(err))
    assert code is not None, f"the page ran past {RUN_TIMEOUT_S} s"
    return code, out.read_text(errors="replace"), err.read_text(errors="replace")


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_blocks_are_well_formed(page: Path) -> None:
    for block in blocks(page):
        where = f"{page.name}:{block['line']}"
        if block["mark"] == "not-run":
            assert len(block["arg"]) > 3, f"{where}: say why the block is not run"
        if block["lang"] == "yaml":
            import yaml

            yaml.safe_load(block["code"])  # raises with the line on a broken example
        if block["lang"] == "python":
            compile(block["code"], where, "exec")


def test_readme_links_resolve() -> None:
    """Relative links in the README point at files that exist (docs pages, benchmarks)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links to the docs"
    broken = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert not broken, f"README.md links to missing files: {broken}"


def test_docs_build_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev and docs extras")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    cli = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    for verb in ("labcoat run", "labcoat report", "labcoat scaling fit", "labcoat evals subset"):
        assert verb in cli, f"the generated CLI reference lacks {verb}"
    assert "LABCOAT_CHECKPOINT_DIR" in (tmp_path / "site" / "environment" / "index.html"
                                        ).read_text(encoding="utf-8")


def _run_page(spec_path: str) -> int:
    """Run one page's blocks in order in the current directory (the test's subprocess)."""
    spec = json.loads(Path(spec_path).read_text())
    namespace: dict = {"__name__": "__main__"}
    for block in spec["blocks"]:
        where = f"{spec['page']}:{block['line']}"
        started = time.monotonic()
        print(f"--- {where} ({block['mark'] or block['lang']})", flush=True)
        if block["mark"] == "file":
            target = Path(block["arg"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block["code"], encoding="utf-8")
            if target.suffix == ".py":
                compile(block["code"], where, "exec")
        elif block["lang"] == "python":
            exec(compile(block["code"], where, "exec"), namespace)
        else:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block["code"]])
            if done.returncode != 0:
                print(f"{where}: the shell block exited with {done.returncode}", flush=True)
                return 1
        print(f"--- {where} took {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_run_page(sys.argv[1]))
