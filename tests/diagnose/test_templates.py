"""Template mining with Drain3 behind generic masking."""

import subprocess
import sys

import pytest

from labcoat.diagnose import DiagnoseError, TemplateConfig, Templates, mine_templates

LOG = [
    "step 1 loss 2.51 lr 3.0e-04 (0.41s)",
    "Saving checkpoint to /ckpt/run-1/step_0000100.pt",
    "step 2 loss 2.48 lr 3.0e-04 (0.40s)",
    "Connection closed by 10.0.0.7 [preauth]",
    "step 3 loss 2.46 lr 2.9e-04 (0.42s)",
    "Saving checkpoint to /ckpt/run-1/step_0000200.pt",
    "Invalid user admin from 10.0.0.9",
    "Invalid user oracle from 10.0.0.12",
    "Invalid user test from 10.0.0.3",
]


def test_lines_of_one_template_share_an_id_and_different_ones_do_not():
    ids = mine_templates(LOG)
    assert ids[0] == ids[2] == ids[4]  # step lines
    assert ids[1] == ids[5]  # checkpoint lines
    assert ids[6] == ids[7] == ids[8]  # a word parameter, generalized by Drain
    assert len({ids[0], ids[1], ids[3], ids[6]}) == 4


def test_ids_are_stable_for_the_same_input():
    assert mine_templates(LOG) == mine_templates(list(LOG))
    assert mine_templates(LOG)[0] == "T1"  # in order of first appearance


def test_template_text_and_match_without_learning():
    miner = Templates()
    ids = [miner.add(line) for line in LOG]
    assert miner.template(ids[6]) == "Invalid user <*> from <IP>"
    assert miner.template(ids[0]) == "step <NUM> loss <NUM> lr <NUM> (<DUR>)"
    assert miner.count(ids[0]) == 3
    assert miner.match("step 99 loss 1.0 lr 1e-5 (3.2s)") == ids[0]
    assert miner.match("something never seen before") is None
    assert len(miner) == len(set(ids))
    assert miner.ids() == sorted(set(ids), key=lambda t: int(t[1:]))
    with pytest.raises(DiagnoseError, match="no template 'T99'"):
        miner.template("T99")


def test_headers_do_not_merge_different_messages():
    lines = [f"2024-05-01 12:00:0{i},000 - train - INFO - {m}"
             for i, m in enumerate(["Saving checkpoint to /x/a.pt", "Loading dataset c4 now",
                                    "Saving checkpoint to /x/b.pt", "Loading dataset wiki now"])]
    ids = mine_templates(lines)
    assert ids[0] == ids[2] and ids[1] == ids[3] and ids[0] != ids[1]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sim_th": 0}, "sim_th=0 must be a number in \\(0, 1\\]"),
        ({"sim_th": 1.5}, "sim_th=1.5"),
        ({"depth": 2}, "depth=2 must be an integer >= 3"),
        ({"max_children": 1}, "max_children=1"),
        ({"max_templates": 0}, "max_templates=0"),
        ({"masking": False}, "strip_headers=True needs masking=True"),
    ],
)
def test_bad_settings_are_refused_with_the_value(settings, message):
    with pytest.raises(DiagnoseError, match=message):
        TemplateConfig(**settings)


def test_bad_input_is_refused():
    with pytest.raises(DiagnoseError, match="not one string"):
        mine_templates("step 1\nstep 2")
    with pytest.raises(DiagnoseError, match="line 1 is int"):
        mine_templates(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(DiagnoseError, match="TemplateConfig"):
        Templates(config={"sim_th": 0.5})  # type: ignore[arg-type]


def test_importing_diagnose_loads_neither_drain3_nor_the_database():
    code = ("import sys, labcoat.diagnose; "
            "print('drain3' in sys.modules, 'sqlalchemy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]
