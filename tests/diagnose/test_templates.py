"""Template mining behind generic masking: the words miner (default) and Drain3."""

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
    "Invalid user guest from 10.0.0.4",
]


def test_lines_of_one_template_share_an_id_and_different_ones_do_not():
    ids = mine_templates(LOG)
    assert ids[0] == ids[2] == ids[4]  # step lines
    assert ids[1] == ids[5]  # checkpoint lines
    assert ids[6] == ids[7] == ids[8] == ids[9]  # a word parameter: 4 distinct words
    assert len({ids[0], ids[1], ids[3], ids[6]}) == 4


def test_event_words_stay_apart_until_a_position_takes_vary_at_words():
    states = [f"[instance: {u}] VM {s} (Lifecycle Event)" for u, s in (
        ("b9000564-fe1a-409b-b8cc-1e88b294cd1d", "Started"),
        ("96abccce-8d1f-4e07-b6d1-4b2ab87e23b4", "Paused"),
        ("b9000564-fe1a-409b-b8cc-1e88b294cd1d", "Resumed"))]
    assert len(set(mine_templates(states))) == 3  # one differing word: three events
    assert len(set(mine_templates(states, config=TemplateConfig(method="drain")))) == 1
    merged = mine_templates([*states, states[0].replace("Started", "Stopped")])
    assert len(set(merged)) == 1 and merged[0] == "T1"  # earlier ids follow the merge
    assert len(set(mine_templates(states, config=TemplateConfig(vary_at=3)))) == 1


def test_a_diverged_value_and_a_number_share_a_template():
    miner = Templates()
    ids = [miner.add(f"step {s} | loss {v} | lr 0.1") for s, v in ((1, "2.5"), (2, "nan"))]
    assert ids[0] == ids[1] and miner.template(ids[0]) == "step <NUM> | loss <*> | lr <NUM>"
    assert miner.add("step 3 | loss nan | now what") != ids[0]  # words still differ


def test_values_without_digits_are_values_by_their_place():
    ids = mine_templates([
        "Successfully started service 'sparkDriver' on port 4040.",
        "Successfully started service 'NettyBlockTransferService' on port 51234.",
        "torch.distributed initialized: backend=nccl world_size=4",
        "torch.distributed initialized: backend=gloo world_size=2",
        "  precision: bf16", "  precision: 0.5",
        "connection from 10.1.2.3 (host-10-1-2-3.example.net) at Sun Jul  3 10:05:25 2005",
        "connection from 10.1.2.4 () at Mon Jul  4 11:00:00 2005",
        "chrome.exe close, 1190 bytes (1.16 KB) sent, 403 bytes received",
        "chrome.exe close, 90 bytes sent, 403 bytes received"])
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[4] == ids[5]
    assert ids[6] == ids[7] and ids[8] == ids[9] and len(set(ids)) == 5


def test_two_words_that_vary_independently_are_parameters():
    combos = [("fineweb", "train"), ("fineweb", "validation"), ("openwebtext", "train")]
    lines = [f"Loading dataset {d} split {s} from /data/{i}/shards"
             for i, (d, s) in enumerate(combos)]
    assert len(set(mine_templates(lines))) == 3  # not yet every pair: three events
    lines.append("Loading dataset openwebtext split validation from /data/9/shards")
    assert len(set(mine_templates(lines))) == 1  # a full 2 x 2 cross product
    other = [*lines[:2], "Loading dataset openwebtext split train from /data/1/shards",
             "Loading model openwebtext split validation from /data/9/shards"]
    assert len(set(mine_templates(other))) == 4  # a different word elsewhere: no product


def test_merged_templates_keep_their_old_ids_valid():
    miner = Templates()
    first = [miner.add(f"Invalid user {u} from 10.0.0.{i}")
             for i, u in enumerate(("admin", "oracle", "test"))]
    assert len(set(first)) == 3 and len(miner) == 3
    assert miner.add("Invalid user guest from 10.0.0.9") == "T1"
    assert [miner.resolve(t) for t in first] == ["T1"] * 3
    assert miner.count(first[2]) == 4 and miner.template(first[1]) == "Invalid user <*> from <IP>"
    assert miner.ids() == ["T1"] and miner.match("Invalid user root from 10.1.1.1") == "T1"


def test_drain_settings_alone_choose_drain_as_before():
    assert TemplateConfig().method == "words"
    assert TemplateConfig(sim_th=0.5).method == TemplateConfig(depth=4).method == "drain"


def test_least_recently_used_templates_are_evicted():
    miner = Templates(TemplateConfig(max_templates=2))
    a = miner.add("alpha beta 1")
    miner.add("gamma delta 2")
    miner.add("alpha beta 3")  # uses a
    miner.add("epsilon zeta 4")  # evicts "gamma delta"
    assert len(miner) == 2 and miner.match("gamma delta 5") is None
    assert miner.match("alpha beta 6") == a


def test_ids_are_stable_for_the_same_input():
    assert mine_templates(LOG) == mine_templates(list(LOG))
    assert mine_templates(LOG)[0] == "T1"  # in order of first appearance


def test_template_text_and_match_without_learning():
    miner = Templates()
    ids = [miner.add(line) for line in LOG]
    assert miner.template(ids[6]) == "Invalid user <*> from <IP>"
    assert miner.template(ids[3]) == "Connection closed by <IP> [preauth]"
    assert miner.template(ids[0]) == "step <NUM> loss <NUM> lr <NUM> (<DUR>)"
    assert miner.count(ids[0]) == 3
    assert miner.match("step 99 loss 1.0 lr 1e-5 (3.2s)") == ids[0]
    assert miner.match("something never seen before") is None
    assert len(miner) == len({miner.resolve(t) for t in ids}) == 4
    assert miner.ids() == ["T1", "T2", "T3", "T4"]
    with pytest.raises(DiagnoseError, match="no template 'T99'"):
        miner.template("T99")


def test_headers_do_not_merge_different_messages():
    lines = [f"2024-05-01 12:00:0{i},000 - train - INFO - {m}"
             for i, m in enumerate(["Saving checkpoint to /x/a.pt", "Loading dataset c4 now",
                                    "Saving checkpoint to /x/b.pt", "Loading dataset c5 now"])]
    ids = mine_templates(lines)
    assert ids[0] == ids[2] and ids[1] == ids[3] and ids[0] != ids[1]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sim_th": 0}, "sim_th=0 must be a number in \\(0, 1\\]"),
        ({"method": "brain"}, "method='brain' must be one of words, drain"),
        ({"vary_at": 1}, "vary_at=1 must be an integer >= 2"),
        ({"method": "words", "sim_th": 0.5}, "sim_th=0.5 set Drain's parse tree"),
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
