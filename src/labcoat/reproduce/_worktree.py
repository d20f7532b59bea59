"""The recorded code, recreated: a temporary `git worktree` at the commit, diff applied.

`recorded_code` yields a `CodeCopy` whose `map` turns paths of the original
repository (in the command, the working directory) into the same paths in the
worktree, so ``python /repo/train.py`` runs ``/tmp/.../train.py`` as it was.
Without git provenance it runs the code as it is now, and says so.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labcoat.errors import LabcoatError


@dataclass
class CodeCopy:
    root: Path | None  # the original repository root (None: no git provenance)
    copy: Path | None  # the worktree that replaces it
    notes: list[str] = field(default_factory=list)

    def map(self, value: str) -> str:
        """`value` with a leading original-root path replaced by the worktree's."""
        if self.root is None or self.copy is None:
            return value
        prefix, sep, path = value.rpartition("=") if value.startswith("-") else ("", "", value)
        original = str(self.root)
        if path == original or path.startswith(original + os.sep):
            return prefix + sep + str(self.copy) + path[len(original):]
        return value


@contextmanager
def recorded_code(code: dict[str, Any], scratch: Path) -> Iterator[CodeCopy]:
    """A worktree of the recorded commit with the recorded diff applied (removed afterwards)."""
    if not code.get("git"):
        yield CodeCopy(None, None, [code.get("note") or "no git provenance: running the code "
                                    "as it is now"])
        return
    root = Path(code["root"])
    if not root.is_dir():
        raise LabcoatError(f"the trial's repository {root} is gone; restore it (commit "
                           f"{code['commit'][:12]}) to rerun the recorded code")
    copy = scratch / "code"
    _git(root, "worktree", "add", "--detach", "--force", str(copy), code["commit"],
         what=f"check out commit {code['commit'][:12]} (was it deleted or rewritten? "
              "`git fsck --lost-found` may find it)")
    try:
        notes = [f"code: commit {code['commit'][:12]} in a temporary worktree"]
        if code.get("diff"):
            patch = scratch / "recorded.diff"
            patch.write_text(code["diff"], encoding="utf-8")
            _git(copy, "apply", "--binary", "--whitespace=nowarn", str(patch),
                 what=f"apply the recorded uncommitted diff ({patch})")
            notes[0] += " with the recorded uncommitted diff applied"
        for skipped in code.get("skipped") or []:
            notes.append(f"not recorded, so not recreated: {skipped['path']} "
                         f"({skipped['reason']})")
        yield CodeCopy(root, copy, notes)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(copy)], cwd=root,
                       capture_output=True, timeout=120)
        subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True, timeout=120)


def _git(cwd: Path, *args: str, what: str) -> None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=300)
    except OSError as err:
        raise LabcoatError(f"cannot run git to {what}: {err}; install git") from None
    if done.returncode != 0:
        raise LabcoatError(f"git could not {what}: {done.stderr.strip() or done.stdout.strip()}")
