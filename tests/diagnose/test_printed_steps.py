"""`labcoat logs` tags each line with the step it was printed at, or with none when the
capture cannot know (issue 30 point 4: a trial that printed a lot had every line tagged
with one late step, the journal's step when the runner read the output).

The trial prints its true step in a form the step parser does not read ("at s=12"), so
the test compares each tag with the truth: lines of slow steps (several polls each) are
tagged exactly; a fast burst of steps read in one poll must be untagged, not tagged with
the burst's last step."""

import json
import re

from helpers import cli

TRIAL = """
import sys, time
import labcoat

run = labcoat.init()
for k in range(1, 4):          # slow: each step spans several of the runner's polls
    run.log(step=k, loss=1.0 / k)
    time.sleep(1.0)
    print(f"at s={k} slow a", flush=True)
    time.sleep(1.0)
    print(f"at s={k} slow b", flush=True)
    time.sleep(1.0)
for k in range(4, 60):         # fast: dozens of steps between two polls
    run.log(step=k, loss=1.0 / k)
    for j in range(5):
        print(f"at s={k} fast {j}", flush=True)
    if k % 10 == 0:
        print(f"step {k}: at s={k} loss {1.0 / k:.3f}", flush=True)  # says its own step
run.finish()
"""


def test_lines_carry_the_step_they_were_printed_at(home, tmp_path):
    (tmp_path / "trial.py").write_text(TRIAL, encoding="utf-8")
    design = tmp_path / "d.yaml"
    design.write_text("name: chatty\ncommand: \"{python} trial.py --seed {seed} --x {x}\"\n"
                      "params: {x: 0}\narms:\n  a: {control: true}\n  b: {params: {x: 1}}\n"
                      "seeds: 1\n", encoding="utf-8")
    cli("run", str(design), cwd=tmp_path, check=True)
    lines = json.loads(cli("logs", "chatty", "--trial", "a-s0", "--json", check=True).stdout)
    assert len(lines) == 3 * 2 + 56 * 5 + 5
    tagged = 0
    for line in lines:
        truth = int(re.search(r"at s=(\d+)", line["text"]).group(1))
        assert line["step"] in (None, truth), line  # never a step it was not printed at
        tagged += line["step"] is not None
    slow = [line for line in lines if "slow" in line["text"]]
    # "b" follows a read of "a" at the same step: known (the first line of a step is not:
    # the runner's reads between it and the last line of the step before found no lines)
    assert sum(line["step"] is not None for line in slow) >= 2
    own = [line for line in lines if line["text"].startswith("step ")]
    assert [line["step"] for line in own] == [10, 20, 30, 40, 50]  # what they say
    assert tagged < len(lines)  # the fast burst is untagged, not tagged late
