"""Every printed line becomes an event; `labcoat logs` filters and reads them back."""

import json

from helpers import cli


def test_printed_lines_are_captured_once_with_level_and_stream(home, tmp_path):
    script = tmp_path / "talk.py"
    script.write_text(
        "import sys, labcoat\n"
        "run = labcoat.init()\n"
        "for step in range(1, 4):\n"
        "    run.log(step, loss=1.0)\n"
        "    print(f'training step {step}')\n"
        "print('WARNING: learning rate is high', file=sys.stderr)\n"
        "print('progress 10%\\rprogress 100%')\n"
        "print('[default1]:[rank1]: hello from rank one')\n"
        "sys.stdout.buffer.write(b'bytes \\xff\\xfe here\\n')\n"
        "run.finish()\n"
    )
    design = tmp_path / "design.yaml"
    design.write_text(f"""name: talk
command: "{{python}} {script} {{seed}}"
arms: {{a: {{control: true}}, b: {{}}}}
seeds: 1
""")
    cli("run", str(design), check=True)
    lines = json.loads(cli("logs", "talk", "--trial", "a-s0", "--json", check=True).stdout)
    texts = [(line["stream"], line["level"], line["text"]) for line in lines]
    assert ("stdout", "info", "training step 1") in texts
    assert ("stderr", "warning", "WARNING: learning rate is high") in texts
    assert ("stdout", "info", "progress 100%") in texts  # what a terminal would show
    assert ("stdout", "info", "bytes \ufffd\ufffd here") in texts
    assert len(texts) == len(set(texts))  # polled many times, recorded once
    ranks = {line["text"]: line["ranks"] for line in lines}
    assert ranks[" hello from rank one"] == [1]  # from the launcher's prefix, shown without it
    assert ranks["training step 1"] == []
    warned = json.loads(cli("logs", "talk", "--level", "warning", "--json", check=True).stdout)
    assert {line["trial"] for line in warned} == {"a-s0", "b-s0"}
    assert all(line["level"] == "warning" for line in warned)
    grep = cli("logs", "talk", "--grep", r"step [23]$", check=True).stdout
    assert "training step 2" in grep and "training step 1" not in grep
    bad = cli("logs", "talk", "--grep", "(")
    assert bad.returncode == 2 and "not a valid regular expression" in bad.stderr
    assert "no trial 'nope'" in cli("logs", "talk", "--trial", "nope").stderr
