"""summarize_templates: per template, how often, where, from when, and only in failures."""

import pytest

from labcoat.diagnose import DiagnoseError, LogLine, summarize_templates


def _lines():
    ok = [LogLine(text=f"step {s} loss {3 - s / 10}", trial="a", attempt=1, rank=r, step=s)
          for s in (1, 2) for r in (0, 1)]
    bad = [LogLine(text=f"step {s} loss {3 - s / 10}", trial="b", attempt=1, rank=0, step=s)
           for s in (1, 2, 3)]
    bad.append(LogLine(text="OSError: [Errno 28] No space left on device: '/ckpt/3'",
                       trial="b", attempt=1, rank=1, step=3))
    return ok + bad


def test_counts_ranks_first_step_and_failed_only():
    progress, disk = summarize_templates(_lines(), failed={("b", 1)},
                                         levels=["info"] * 7 + ["error"])
    assert (progress.template, progress.count, progress.first_step) == ("T1", 7, 1)
    assert progress.trials == ("a", "b") and progress.ranks == (0, 1)
    assert progress.only_failed is False and progress.levels == ("info",)
    assert (disk.template, disk.count, disk.ranks, disk.first_step) == ("T2", 1, (1,), 3)
    assert disk.only_failed is True and disk.levels == ("error",)
    assert disk.text == "OSError: [Errno <NUM>] No space left on device: '<PATH>'"
    assert disk.to_dict()["only_failed"] is True


def test_selection_counts_but_does_not_change_ids():
    lines = _lines()
    show = [line.trial == "b" and line.rank == 1 for line in lines]
    (only,) = summarize_templates(lines, failed={("b", 1)}, show=show)
    assert (only.template, only.count) == ("T2", 1)
    # with every attempt failed, nothing is "only in failures": there is nothing to contrast
    assert not any(t.only_failed for t in summarize_templates(lines, failed={("a", 1),
                                                                             ("b", 1)}))


def test_bad_input():
    with pytest.raises(DiagnoseError, match="not a string"):
        summarize_templates("step 1")
    with pytest.raises(DiagnoseError, match="show has 1 entries for 8 lines"):
        summarize_templates(_lines(), show=[True])
    with pytest.raises(DiagnoseError, match="line 0 is str, not a LogLine"):
        summarize_templates(["step 1"])
