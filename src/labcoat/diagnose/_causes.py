"""Likely causes of a failure: rules over single lines and over how the attempt ended.

Each rule is a regular expression for messages that PyTorch, NCCL, gloo, the
CUDA runtime, the Linux kernel, Python, torchrun or Slurm print when a run
dies of that cause. A line gets at most one cause: the most specific rule that
matches (`CAUSES` is in that order), so "DataLoader worker (pid 7) is killed by
signal: Killed" is a data-loader death, not a signal, and an NCCL error whose
message says "uncorrectable ECC error" is hardware.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# cause -> what it means; most specific first (the first matching rule wins on a line).
CAUSES: dict[str, str] = {
    "script_missing": "the script, file or module the command names does not exist",
    "command_not_found": "the command was not found or cannot be executed (not installed, "
                         "not on PATH, misspelled, or not executable)",
    "hardware": "a GPU or host hardware fault (uncorrectable ECC error, Xid, GPU lost)",
    "dataloader_worker": "a data-loader worker process died",
    "disk_full": "no space left on the device (or a disk quota exceeded)",
    "out_of_memory": "out of memory (GPU allocation, MemoryError, or the kernel's OOM killer)",
    "nan": "NaN/Inf in the loss, gradients or weights",
    "exception": "a Python exception",
    "signal": "the process was killed by a signal (SIGKILL, SIGTERM; exit 137/143)",
    "collective_timeout": "a collective operation (NCCL/gloo) timed out or failed",
    "hang": "no progress: the runner saw no journal line for its heartbeat timeout",
}

_R = re.compile
# how a launcher says it could not start the command: labcoat's runner ("could not start
# 'X': <strerror>"), bash, dash, env, and Python for a script or module it cannot find
_START = r"could not start '(?P<what>{})'(?: on \S+)?: {}"
_RULES: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "script_missing": (  # `what` names a path (it has a "/") or a Python module
        ("script missing", _R(_START.format(r"[^']*/[^']*", "No such file or directory"))),
        ("script missing", _R(r"can't open file '(?P<what>[^']+)': \[Errno 2\]")),
        ("module missing", _R(r"python[\d.]*: No module named (?P<what>[\w.]+)")),
        ("script missing", _R(r"\b(?:ba|da|z)?sh: (?:line \d+: |\d+: )?(?P<what>\S*/[^\s:]*): "
                              r"(?:No such file or directory|not found)")),
    ),
    "command_not_found": (
        ("command not found", _R(_START.format(r"[^']+", "No such file or directory"))),
        ("command not found", _R(r"(?P<what>[^\s:]+): command not found")),
        ("command not found", _R(r"\bsh: \d+: (?P<what>[^\s:]+): not found")),
        ("command not found", _R(r"\benv: '?(?P<what>[^\s:']+)'?: No such file or directory")),
        ("not executable", _R(_START.format(r"[^']+", "Permission denied"))),
        ("not executable", _R(r"\b(?:ba|da|z)?sh: (?:line \d+: |\d+: )?(?P<what>[^\s:]+): "
                              r"Permission denied")),
    ),
    "hardware": (
        ("Xid", _R(r"\bXid\b\s*(?:\([^)]*\))?\s*:?\s*\d+")),
        ("ECC error", _R(r"(?i)\b(?:uncorrectable|double[- ]bit)\b.{0,40}\bECC\b"
                         r"|\bECC\b.{0,20}\berrors?\b|cudaErrorECCUncorrectable")),
        ("uncorrectable error", _R(r"(?i)\buncorrectable (?:error|memory error|NVLink)")),
        ("GPU lost", _R(r"(?i)fallen off the bus|\bGPU is lost\b|\bGPU lost\b")),
        ("hardware error", _R(r"(?i)\bhardware error\b|\bmachine check\b"
                              r"|\bNVLink\b.{0,40}\berror\b|\bPCIe\b.{0,30}\b(?:bus )?error\b")),
    ),
    "dataloader_worker": (
        ("data-loader worker died", _R(r"DataLoader worker \(pid(?:\(s\)|s)?[^)]*\) "
                                       r"(?:is killed|exited unexpectedly)"
                                       r"|DataLoader worker exited unexpectedly")),
        ("shared memory", _R(r"insufficient shared memory \(shm\)")),
    ),
    "disk_full": (
        ("ENOSPC", _R(r"No space left on device|\bENOSPC\b|\[Errno 28\]")),
        ("disk quota", _R(r"Disk quota exceeded|\bEDQUOT\b|\[Errno 122\]")),
        ("checkpoint write failed", _R(r"PytorchStreamWriter failed writing file")),
    ),
    "out_of_memory": (
        ("out of memory", _R(r"(?i)\bout of memory\b|\bOutOfMemoryError\b|RESOURCE_EXHAUSTED")),
        ("MemoryError", _R(r"\bMemoryError\b|std::bad_alloc|CUBLAS_STATUS_ALLOC_FAILED")),
        ("allocation failed", _R(r"(?i)cannot allocate memory|can't allocate memory"
                                 r"|\bENOMEM\b|\[Errno 12\]")),
        ("OOM killer", _R(r"(?i)\boom[-_ ]?kill(?:er|ed)?\b|invoked oom-killer|\boom_reaper\b")),
    ),
    "nan": (
        ("non-finite value", _R(
            r"(?i)\b(?:loss|\w+_loss|loss_\w+|grad_norm|gnorm|grad norm|perplexity|ppl)\b"
            r"\s*[:=]?\s*[-+]?(?:nan|inf(?:inity)?)\b")),
        ("non-finite value", _R(
            r"(?i)\b(?:loss|grad(?:ient)?s?|weights?|param(?:eter)?s?|activations?|outputs?)\b"
            r".{0,40}?\b(?:is|are|became|becomes|contains?|has|have)\s+(?:an?\s+)?"
            r"(?:nan|inf|non-?finite)\b")),
        ("non-finite value", _R(
            r"(?i)\b(?:found|detected|encountered)\s+(?:a\s+)?(?:nan|inf|non-?finite)\b"
            r"|\bnon-?finite (?:loss|grad|gradients?|values?|weights?)\b"
            r"|returned nan values|\bnonfinite\.\w+")),
    ),
    "signal": (
        ("killed by signal", _R(r"(?i)\bkilled by signal\b|\bSignal \d+ \(SIG[A-Z]+\) received"
                                r"|\bgot signal:? ?\d+|\breceived signal \d+")),
        ("signal exit code", _R(r"\bexitcode\s*:\s*-\d+|(?i:\bexit(?:ed)?(?: with)?"
                                r"(?: code| status)?\s*:?\s*)(?:137|143|134|139)\b")),
        ("signal name", _R(r"\bSIG(?:KILL|TERM|ABRT|SEGV|BUS|HUP)\b")),
        ("killed", _R(r"(?:^|:)\s*(?:Killed|Terminated|Aborted(?: \(core dumped\))?)\.?\s*$")),
        ("aborted", _R(r"\bAborted(?: \(core dumped\))?")),
        ("crash", _R(r"Segmentation fault|core dumped|Fatal Python error|Bus error")),
        ("preempted", _R(r"\*\*\* (?:JOB|STEP) \d+(?:\.\d+)? ON \S+ CANCELLED")),
    ),
    "collective_timeout": (
        ("watchdog timeout", _R(r"Watchdog caught collective operation timeout"
                                r"|ran for \d+ milliseconds before timing out"
                                r"|collective operation timeout|Heartbeat monitor timed out"
                                r"|failed to pass monitoredBarrier"
                                r"|NCCL operations have failed or timed out")),
        ("collective timeout", _R(r"(?i)\b(?:nccl|gloo|c10d|ProcessGroup\w*|collective\w*)\b"
                                  r".{0,120}?\b(?:timed? ?out|timeout)\b(?!\s*\(ms\))")),
        ("NCCL error", _R(r"\bnccl(?:SystemError|InternalError|RemoteError|UnhandledCudaError"
                          r"|InvalidUsage)\b|\bNCCL [Ee]rror\b|\bDist(?:Backend|Network|Store)"
                          r"Error\b|NCCL communicator was aborted|NCCL WARN NET/.*\berror\b")),
        ("peer gone", _R(r"Connection (?:reset|closed) by peer")),
    ),
}
# A launcher stopping the surviving ranks after another one failed: a consequence, never a
# cause (torchrun prints it for every healthy rank it terminates).
_CONSEQUENCE = _R(r"closing signal SIG|Sending process \d+ closing signal")
# Words (lower case) one of which every rule of a cause needs: a cheap pre-check, so the
# rules run only on the few lines that could match them.
_KEYWORDS: dict[str, str] = {
    "script_missing": "such found open module",
    "command_not_found": "found such permission",
    "hardware": "xid ecc uncorrectable fallen lost hardware machine nvlink pcie "
                "cudaerroreccuncorrectable",
    "dataloader_worker": "dataloader shm",
    "disk_full": "space enospc errno quota edquot pytorchstreamwriter",
    "out_of_memory": "memory outofmemoryerror memoryerror resource_exhausted bad_alloc "
                     "cublas_status_alloc_failed allocate enomem errno oom oom_kill oom_reaper",
    "nan": "nan inf infinity finite nonfinite",
    "signal": "signal exitcode exit exited sigkill sigterm sigabrt sigsegv sigbus sighup "
              "killed terminated aborted segmentation dumped fatal bus cancelled",
    "collective_timeout": "watchdog timed timing timeout time monitor nccl gloo c10d "
                          "processgroupnccl processgroupgloo collective monitoredbarrier peer "
                          "ncclsystemerror ncclinternalerror ncclremoteerror "
                          "ncclunhandledcudaerror ncclinvalidusage distbackenderror "
                          "distnetworkerror diststoreerror",
}
_CAUSES_OF_WORD: dict[str, tuple[str, ...]] = {}
for _cause in CAUSES:
    for _word in _KEYWORDS.get(_cause, "").split():
        _CAUSES_OF_WORD[_word] = (*_CAUSES_OF_WORD.get(_word, ()), _cause)
_WORDS = re.compile(r"[a-z0-9_]+")
_KNOWN_WORDS = frozenset(_CAUSES_OF_WORD)
_ORDER = tuple(CAUSES)


@dataclass(frozen=True)
class CauseHit:
    """A rule that matched: the cause, the rule's label and the matched text."""

    cause: str
    rule: str
    match: str
    what: str | None = None  # the command, script or module a launch failure names

    def __str__(self) -> str:
        return f"{self.cause} ({self.rule}: {self.match!r})"


def match_cause(text: str) -> CauseHit | None:
    """The most specific cause rule `text` matches (see `CAUSES`), or None."""
    words = _KNOWN_WORDS.intersection(_WORDS.findall(text.lower()))
    if not words or _CONSEQUENCE.search(text):
        return None
    candidates = {cause for word in words for cause in _CAUSES_OF_WORD[word]}
    for cause in _ORDER:
        if cause not in candidates:
            continue
        for rule, pattern in _RULES[cause]:
            found = pattern.search(text)
            if found:
                what = found.groupdict().get("what")
                return CauseHit(cause, rule, found.group().strip()[:120], what)
    return None


# What to do about a command that could not start (see `launch_failure`).
LAUNCH_FIXES: dict[str, str] = {
    "script_missing": "check the path in the design's `command:`; a relative path resolves in "
                      "the directory `labcoat run` ran in",
    "command_not_found": "install it or fix its name in the design's `command:` (or give its "
                         "full path)",
    "not executable": "make it executable (chmod +x) or run it through its interpreter, e.g. "
                      "`bash script.sh`",
}
# The shell's exit statuses for a command it cannot find (127) or cannot execute (126).
_SHELL_EXIT = {127: ("command_not_found", "command not found"),
               126: ("command_not_found", "not executable")}


def launch_failure(hit: CauseHit) -> tuple[str, str] | None:
    """For a command that could not start: what happened, in words ("command not found:
    X", "script missing: path"), and the fix; None for any other cause."""
    if hit.cause not in ("script_missing", "command_not_found"):
        return None
    what = f": {hit.what}" if hit.what else ""
    fix = LAUNCH_FIXES.get(hit.rule) or LAUNCH_FIXES[hit.cause]
    return f"{hit.rule}{what}", fix


_SIGNAL_EXIT = {134: "SIGABRT", 137: "SIGKILL", 139: "SIGSEGV", 143: "SIGTERM"}


def cause_of_end(cause: str | None, exit_code: int | None = None) -> CauseHit | None:
    """What the runner's record of the attempt's end says: "hang: ..." is a hang,
    "killed by signal SIGKILL" or exit 137/143 a signal, and "exit N: <last stderr
    line>" whatever that line says (e.g. an OOM). None for a clean or unknown end."""
    text = (cause or "").strip()
    if text.startswith("hang"):
        return CauseHit("hang", "heartbeat timeout", text[:120])
    if text.startswith(("exit 0", "interrupted", "finished", "lost", "ad-hoc")):
        return None
    whole = match_cause(text)  # "could not start 'X': ..." is one message, not "head: tail"
    if whole is not None and whole.cause in ("script_missing", "command_not_found"):
        return whole
    head, _, tail = text.partition(": ")
    if tail:
        hit = match_cause(tail)
        if hit is not None and hit.cause != "signal":
            return hit
    found = re.search(r"killed by signal (SIG[A-Z]+)", head)
    if found:
        return CauseHit("signal", "killed by signal", found.group())
    if exit_code is not None and exit_code < 0:
        return CauseHit("signal", "killed by signal", f"exit code {exit_code}")
    code = exit_code
    if code is None:
        number = re.match(r"exit (-?\d+)$", head)
        code = int(number.group(1)) if number else None
    if code in _SIGNAL_EXIT:
        return CauseHit("signal", "signal exit code", f"exit {code} ({_SIGNAL_EXIT[code]})")
    if code in _SHELL_EXIT:
        cause, rule = _SHELL_EXIT[code]
        return CauseHit(cause, rule, f"exit {code} (the shell's code for {rule})")
    return None
