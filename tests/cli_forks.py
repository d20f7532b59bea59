"""`labcoat ARGS` as a real process, forked from a server that has already imported the
heavy third-party libraries (scipy.stats, SQLAlchemy, pydantic, plotly) and labcoat's own
modules below the CLI: each call skips the ~1-1.5 s of imports a fresh
`python -m labcoat.cli` pays, which the suite's ~1,000 CLI calls otherwise spend (and
the ~0.15 s labcoat's modules alone cost a forked call: 0.33 -> 0.16 s of CPU for a
`labcoat status`).

The child is its own process, as `subprocess.run` would start: its own pid, working
directory, environment (the caller's, copied), stdin from /dev/null, stdout and stderr to
files, exit code from `sys.exit`, and `python -m labcoat.cli`'s `sys.argv`, `__main__`
and `sys.path[0]` (the working directory). labcoat's modules read no environment at import
(the CLI tests would see a server's LABCOAT_HOME if one did), but for the CLI's console,
which the child makes again (`make_console`) once its environment and stdout are set; the
server also builds the click command of the Typer app once (~0.09 s a call, as Typer
introspects every command's signature), which the child's `app()` reuses. torch is never
preloaded (its threads and fork do not mix): nor the labcoat packages built on it.

Run as a script, this is the server: one JSON request per line on stdin
({"args", "env", "cwd", "out", "err", "timeout"}), one JSON reply per line on stdout
({"code"} or {"timeout": true}), one request at a time. Run with `--socket PATH`, it
serves `labcoat` commands a shell runs (`shim`, for the docs' examples): each connection
brings its stdin, stdout and stderr (SCM_RIGHTS) and one JSON line ({"args", "env",
"cwd"}); a forked manager forks the command, waits and answers {"code"}, so calls may
overlap (a pipe between two `labcoat` commands).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

PRELOAD = ("numpy", "scipy.stats", "scipy.optimize", "sqlalchemy", "sqlalchemy.orm",
           "pydantic", "yaml", "alembic", "plotly.graph_objects", "statsmodels.api", "typer",
           "rich.console", "rich.table")
# built on torch, lightning or fastapi, which the child imports (a failed preload would
# leave half of lightning_utilities behind)
NOT_PRELOADED = ("labcoat.torch", "labcoat.workloads", "labcoat.integrations", "labcoat.inside",
                 "labcoat.web")


def _std_fds(out: str, err: str) -> list[int]:
    """stdin from /dev/null, stdout and stderr into the files `out` and `err`."""
    write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    return [os.open(os.devnull, os.O_RDONLY), os.open(out, write, 0o644),
            os.open(err, write, 0o644)]


def _child(request: dict, replies: int, fds: list[int] | None = None) -> None:
    """In the forked child: become `python -m labcoat.cli ARGS`, with `fds` as stdin,
    stdout and stderr (else /dev/null and the request's files); never returns."""
    code = 1
    try:
        os.close(replies)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        fds = fds or _std_fds(request["out"], request["err"])
        for fd, target in zip(fds, (0, 1, 2), strict=True):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # not the server's buffered requests
        if "labcoat.cli._common" in sys.modules:  # the console of this process, not the server's
            common = sys.modules["labcoat.cli._common"]
            common.console.__dict__.update(common.make_console().__dict__)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:1] = [os.getcwd(), *[p for p in extra if p not in sys.path]]
        import runpy

        if "script" in request:  # `python SCRIPT ARGS` instead (tests/test_docs.py's pages)
            sys.argv = [request["script"], *request["args"]]
            sys.path[0] = os.path.dirname(os.path.abspath(request["script"]))
            runpy.run_path(request["script"], run_name="__main__")
        else:
            sys.argv = ["labcoat", *request["args"]]
            runpy.run_module("labcoat.cli", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # an uncaught exception: its traceback, exit 1, as python does
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"code": os.waitstatus_to_exitcode(status)}
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"timeout": True}
        time.sleep(0.005)


class _NoTorch:
    """While preloading: `import torch` fails, so the labcoat modules built on it are left
    to the child (torch's threads and fork do not mix). None of labcoat's modules catches
    that failure at import (a module that did would keep torch = None)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"{name} is not preloaded")


def _preload() -> None:
    import importlib
    import pkgutil

    import labcoat

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an extra not installed: the child imports what it needs
            pass
    blocker, packages = _NoTorch(), [labcoat]
    sys.meta_path.insert(0, blocker)
    try:
        while packages:  # not pkgutil.walk_packages: it imports the packages left out too
            package = packages.pop()
            for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
                if module.name.startswith(NOT_PRELOADED) or module.name.endswith(".__main__"):
                    continue
                try:
                    imported = importlib.import_module(module.name)
                except ImportError:  # torch, or an extra not installed
                    continue
                if module.ispkg:
                    packages.append(imported)
    finally:
        sys.meta_path.remove(blocker)
    _build_command_once()


def _build_command_once() -> None:
    """typer.main.get_command(app) for labcoat's app, built here once instead of per call."""
    import typer.main

    from labcoat.cli import app

    built, build = typer.main.get_command(app), typer.main.get_command
    typer.main.get_command = lambda typer_app: built if typer_app is app else build(typer_app)


def serve() -> None:
    _preload()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing else may write into the replies
    replies.write("ready\n")
    replies.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request, replies.fileno())
        replies.write(json.dumps(_wait(pid, request["timeout"])) + "\n")
        replies.flush()


def serve_socket(path: str) -> None:
    import socket

    _preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # managers are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _manage(connection)
        connection.close()


def _manage(connection) -> None:
    """One shell's `labcoat ARGS`: fork it with the caller's fds, answer its exit code."""
    import socket

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while not data.endswith(b"\n"):
        more = connection.recv(1 << 16)
        if not more:
            os._exit(1)
        data += more
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
        _child(request, connection.fileno(), fds)
    for fd in fds:
        os.close(fd)
    reply = _wait(pid, request.get("timeout", float("inf")))
    connection.sendall((json.dumps(reply) + "\n").encode())
    os._exit(0)


def run_script(socket_path: str, script: str, args: list[str], cwd: str, env: dict[str, str],
               timeout: float, out: str, err: str) -> int | None:
    """`python SCRIPT ARGS` forked by the `--socket` server, stdout and stderr into the files
    `out` and `err`; its exit code, or None when it ran past `timeout` (it is killed)."""
    import socket

    request = {"script": script, "args": args, "env": env, "cwd": cwd, "timeout": timeout}
    fds = _std_fds(out, err)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.connect(socket_path)
            socket.send_fds(server, [json.dumps(request).encode() + b"\n"], fds)
            for fd in fds:
                os.close(fd)
            fds = []
            reply = json.loads(server.makefile().readline())
    finally:
        for fd in fds:
            os.close(fd)
    return None if reply.get("timeout") else reply["code"]


SHIM = """#!{python} -IS
# `labcoat ARGS` run by the CLI fork server (tests/cli_forks.py) at $LABCOAT_TEST_CLI_SOCKET
import json, os, socket, sys
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.connect(os.environ["LABCOAT_TEST_CLI_SOCKET"])
request = {{"args": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}}
socket.send_fds(server, [json.dumps(request).encode() + b"\\n"], [0, 1, 2])
reply = server.makefile().readline()
code = json.loads(reply)["code"] if reply else 1
sys.exit(128 - code if code < 0 else code)
"""


def shim(directory: str) -> str:
    """Write `directory/labcoat`, a command that runs through a `--socket` server."""
    path = os.path.join(directory, "labcoat")
    with open(path, "w", encoding="utf-8") as f:
        f.write(SHIM.format(python=sys.executable))
    os.chmod(path, 0o755)
    return path


if __name__ == "__main__":
    if sys.argv[1:2] == ["--socket"]:
        serve_socket(sys.argv[2])
    else:
        serve()


class Server:
    """One server per test process, started on first use (`run`)."""

    def __init__(self) -> None:
        import subprocess

        self.process = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        if self.process.stdout.readline() != "ready\n":
            raise RuntimeError("the CLI fork server did not start")

    def run(self, args: list[str], cwd: str, timeout: float, scratch: str) -> dict:
        request = {"args": args, "env": dict(os.environ), "cwd": cwd, "timeout": timeout,
                   "out": os.path.join(scratch, "out"), "err": os.path.join(scratch, "err")}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        with open(request["out"], encoding="utf-8", errors="replace") as out, \
                open(request["err"], encoding="utf-8", errors="replace") as err:
            return {**reply, "stdout": out.read(), "stderr": err.read()}
