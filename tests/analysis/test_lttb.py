"""LTTB against a line-by-line transcription of the reference implementation
(Steinarsson's flot-downsample, 2013) and the properties a plot relies on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labcoat.report import downsample, lttb


def reference_lttb(data: list[tuple[float, float]], threshold: int) -> list[int]:
    """flot-downsample's largestTriangleThreeBuckets, transcribed loop for loop (indices)."""
    n = len(data)
    if threshold >= n or threshold == 0:
        return list(range(n))
    every = (n - 2) / (threshold - 2)
    a, sampled = 0, [0]
    for i in range(threshold - 2):
        avg_start = math.floor((i + 1) * every) + 1
        avg_end = min(math.floor((i + 2) * every) + 1, n)
        avg_x = sum(data[j][0] for j in range(avg_start, avg_end)) / (avg_end - avg_start)
        avg_y = sum(data[j][1] for j in range(avg_start, avg_end)) / (avg_end - avg_start)
        range_offs = math.floor(i * every) + 1
        range_to = math.floor((i + 1) * every) + 1
        ax, ay = data[a]
        max_area, next_a = -1.0, range_offs
        for j in range(range_offs, range_to):
            area = abs((ax - avg_x) * (data[j][1] - ay) - (ax - data[j][0]) * (avg_y - ay)) * 0.5
            if area > max_area:
                max_area, next_a = area, j
        sampled.append(next_a)
        a = next_a
    sampled.append(n - 1)
    return sampled


@pytest.mark.parametrize(("m", "n"), [(100, 10), (1000, 37), (5000, 500), (50, 49), (7, 3),
                                      (333, 100), (10_000, 1000)])
def test_matches_the_reference_implementation(m: int, n: int) -> None:
    rng = np.random.default_rng(m + n)
    x = np.cumsum(rng.uniform(0.5, 2.0, m))  # uneven steps
    y = np.cumsum(rng.normal(size=m))
    expected = reference_lttb(list(zip(x.tolist(), y.tolist(), strict=True)), n)
    assert lttb(x, y, n).tolist() == expected


def test_keeps_ends_count_and_order_and_is_identity_when_short() -> None:
    rng = np.random.default_rng(0)
    x, y = np.arange(2000.0), rng.normal(size=2000)
    kept = lttb(x, y, 300)
    assert kept.size == 300 and kept[0] == 0 and kept[-1] == 1999
    assert np.all(np.diff(kept) > 0)
    assert lttb(x[:50], y[:50], 300).tolist() == list(range(50))


def test_a_single_spike_survives_where_decimation_loses_it() -> None:
    y = np.zeros(10_000)
    y[4321] = 50.0  # a loss spike at one step
    x = np.arange(y.size, dtype=float)
    assert 4321 in lttb(x, y, 100)
    assert 4321 not in np.arange(0, 10_000, 100)  # what every-100th would keep


def test_downsample_keeps_nan_as_gaps_and_bad_arguments_raise() -> None:
    x = np.arange(1000.0)
    y = np.sin(x / 50)
    y[500] = np.nan
    xs, ys = downsample(x, y, 50)
    assert 500.0 in xs.tolist() and np.isnan(ys[xs.tolist().index(500.0)])
    assert xs.size <= 51
    with pytest.raises(ValueError, match="n must be >= 3"):
        lttb(x, y, 2)
    with pytest.raises(ValueError, match="one length"):
        lttb(x, y[:10], 5)
