"""The text log-log plot puts each mark where its coordinates say."""

import numpy as np

from labcoat.analysis._textplot import loglog_plot


def test_marks_land_on_a_log_log_grid():
    x = np.array([1.0, 10.0, 100.0])
    y = np.array([100.0, 10.0, 1.0])
    grid = np.array([1.0, 100.0])
    lines = loglog_plot(x, y, grid, curve=np.array([100.0, 1.0]), low=np.array([100.0, 1.0]),
                        high=np.array([100.0, 1.0]), width=21, height=11)
    rows = [line.split("|", 1)[1] for line in lines[:11]]
    # y = 1/x on log axes is the diagonal: x=1 top left, 10 in the middle, 100 bottom right
    assert rows[0][0] == "o" and rows[5][10] == "o" and rows[10][20] == "o"
    assert sum(row.count("o") for row in rows) == 3
    assert lines[0].startswith("100 |") and lines[10].startswith("  1 |")
    assert lines[-1].split() == ["1", "100"]


def test_a_flat_plot_draws_nothing():
    one = np.array([2.0])
    assert loglog_plot(one, one, one, one, one, one) == []
