"""Known noise: lines that are never the story of a failure, flagged to be hidden.

Noise is hidden by default and never deleted (the capture keeps every line).
What counts as noise: blank lines and separator rules; progress bars (tqdm,
including its carriage-return redraws, Keras, pip/rich); deprecation and future
warnings and the source line Python's warnings module prints under them; the
startup chatter of pip, torchrun, NCCL (``NCCL INFO``), TensorFlow, Hugging Face
and Lightning; wandb's banner. A line that matches a failure-cause rule (see
`CAUSES`) is never noise, whatever else it looks like.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from labcoat.diagnose._causes import match_cause
from labcoat.diagnose._errors import DiagnoseError

# Lines that are noise on their own (searched anywhere in the line: prefixes such as
# "[default0]:" or a logging header come before the part that gives them away).
_NOISE = re.compile(
    "|".join((
        # progress bars: tqdm "45%|####5 | 9/20 [00:01<00:02, 5.1it/s]", Keras
        # "12/100 [==>....] - ETA: 3s", rich/pip "━━━━━━ 1.2/1.2 MB"
        r"\d%\|", r"\|\s*\d+(?:\.\d+)?[kMG]?/\d+(?:\.\d+)?[kMG]?\s*\[",
        r"\[\d{1,2}:\d{2}(?::\d{2})?<[\d:?]+", r"\d+/\d+ \[=*>?\.*\]", r"━━━",
        # deprecation boilerplate
        r"\b(?:Future|Deprecation|PendingDeprecation)Warning\b",
        r"Warning: .*(?:\bis deprecated\b|\bwill be removed\b|\bdeprecated and\b"
        r"|\bTypedStorage\b)",
        # pip
        r"^(?:Requirement already satisfied|Collecting|Downloading|Using cached"
        r"|Installing collected packages|Successfully (?:installed|built|uninstalled)"
        r"|Building wheels? for|Created wheel for|Stored in directory|Looking in (?:indexes|links)"
        r"|Obtaining|Preparing metadata|Getting requirements to build|Attempting uninstall"
        r"|Found existing installation|Uninstalling|Installing build dependencies)\b",
        r"\[notice\] (?:A new release of pip|To update, run)",
        r"WARNING: (?:Running pip as the 'root' user|You are using pip version)",
        # torchrun / torch.distributed startup
        r"Setting OMP_NUM_THREADS environment variable for each process",
        r"NOTE: Redirects are currently not supported",
        r"\bNCCL INFO\b",
        # TensorFlow / CUDA libraries
        r"oneDNN custom operations are on|This TensorFlow binary is optimized"
        r"|To enable the following instructions:|Unable to register cu(?:DNN|FFT|BLAS) factory"
        r"|TF-TRT Warning|Using TensorFlow backend",
        # Hugging Face
        r"Some weights of .* were not (?:initialized|used)|You should probably TRAIN this model"
        r"|- This IS (?:NOT )?expected if you are|Special tokens have been added"
        r"|huggingface/tokenizers: The current process just got forked"
        r"|To disable this warning, you can either:|Avoid using `tokenizers` before the fork"
        r"|Explicitly set the environment variable TOKENIZERS_PARALLELISM",
        # Lightning
        r"\b(?:GPU|TPU|HPU|IPU) available: |LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES"
        r"|\b(?:Trainable|Non-trainable|Total) params\b|Total estimated model params size"
        r"|that has Tensor Cores. To properly utilize them",
        # wandb banner (its errors and warnings stay visible)
        r"^wandb: (?!ERROR|WARNING)",
    ))
)
# Whole-line patterns: blank, or a rule made of symbols ("=====", "*****", "-----").
_BLANK_OR_RULE = re.compile(r"^(?:\[(?:default|rank)\d+\]:)?\s*(?:[=*#~_\-+.:|<>]{4,}\s*)?$")
_WARNING = re.compile(r"\w+Warning\b")
_CONTINUATION = re.compile(r"^(?:\[(?:default|rank)\d+\]:)?\s+\S")  # indented
_NOT_CONTINUATION = re.compile(r"^\s*(?:Traceback|File \")")


def is_noise(lines: Sequence[str]) -> list[bool]:
    """One flag per line: True for known noise (see the module docstring).

    lines: consecutive lines of one stream, in order (a warning's source line is
    recognized by the warning above it). A list, not one string.
    """
    if isinstance(lines, str | bytes):
        raise DiagnoseError("is_noise() takes a sequence of lines, not one string; "
                            "for one line use is_noise([line])[0]")
    flags: list[bool] = []
    after_noisy_warning = False
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise DiagnoseError(f"line {i} is {type(line).__name__}, not text (str)")
        noisy = _is_noise_line(line)
        if not noisy and after_noisy_warning and _CONTINUATION.match(line) \
                and not _NOT_CONTINUATION.match(line):
            noisy = match_cause(line) is None  # "  warnings.warn(" under a FutureWarning
        after_noisy_warning = noisy and bool(_WARNING.search(line))
        flags.append(noisy)
    return flags


# Substrings one of which every pattern of _NOISE needs: most lines skip the regex.
_HINTS = ("%|", "<", "[=", "[.", "[>", "━", "Warning", "Requirement", "Collecting",
          "Downloading", "Using cached", "Installing", "Successfully", "Building", "Created wheel",
          "Stored in", "Looking in", "Obtaining", "Preparing", "Getting requirements",
          "Attempting", "Found existing", "Uninstalling", "[notice]", "WARNING: ",
          "OMP_NUM_THREADS", "Redirects", "NCCL INFO", "oneDNN", "TensorFlow", "Unable to register",
          "TF-TRT", "Some weights", "TRAIN this", "expected if", "Special tokens", "tokenizers",
          "To disable this warning", "TOKENIZERS_PARALLELISM", " available: ", "LOCAL_RANK",
          " params", "Tensor Cores", "wandb: ")


def _is_noise_line(line: str) -> bool:
    text = line.rsplit("\r", 1)[-1] if "\r" in line else line  # a redrawn progress bar
    if _BLANK_OR_RULE.match(text):
        return True
    if not any(hint in text for hint in _HINTS):
        return False
    if not _NOISE.search(text):
        return False
    return match_cause(line) is None
