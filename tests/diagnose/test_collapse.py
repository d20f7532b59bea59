"""The same line from several ranks collapses to one, with the count and the ranks."""

from labcoat.diagnose import LogLine, collapse_ranks


def test_identical_lines_after_masking_collapse_across_ranks():
    records = [(r, f"Watchdog caught collective operation timeout after {600000 + r} ms")
               for r in (0, 1, 2, 3)]
    records.insert(2, (1, "Saving checkpoint to /ckpt/step_10.pt"))
    groups = collapse_ranks(records)
    assert [(g.count, g.ranks) for g in groups] == [(4, (0, 1, 2, 3)), (1, (1,))]
    assert groups[0].text.endswith("600000 ms")  # the first line, as printed
    assert groups[0].masked == "Watchdog caught collective operation timeout after <DUR>"
    assert groups[0].first == 0 and groups[1].first == 2
    assert groups[0].template != groups[1].template


def test_ranks_are_read_from_prefixes_and_words_must_match():
    groups = collapse_ranks([(None, "[rank0]: loss is nan"), (None, "[rank5]: loss is nan"),
                             (None, "[rank2]: loss is inf")])
    assert [(g.count, g.ranks) for g in groups] == [(2, (0, 5)), (1, (2,))]


def test_per_step_keeps_each_steps_lines_apart():
    lines = [LogLine(text=f"[rank{r}]: step {s} loss 2.{r}", step=None) for s in (1, 2)
             for r in (0, 1)]
    assert [g.count for g in collapse_ranks(lines)] == [4]
    by_step = collapse_ranks(lines, per_step=True)
    assert [(g.step, g.count, g.ranks) for g in by_step] == [(1, 2, (0, 1)), (2, 2, (0, 1))]
