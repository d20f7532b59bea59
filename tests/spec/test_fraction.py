"""A fraction's generators are read by one parser (stats), so the design file, its runs
and the review agree (issue 36, point 1): the runs are exactly those of
stats.fractional_factorial, checked here by brute force over the full product."""

import itertools

import pytest

from labcoat import spec, stats
from labcoat.errors import LabcoatError

DESIGN = """name: frac
command: "echo {{a}} {{b}} {{c}} {{d}}"
hypothesis: {{claim: x, metric: loss, direction: decrease}}
params: {{a: 0, b: 0, c: 0, d: 0}}
factors:
  a: {{levels: [0, 1]}}
  b: {{levels: [0, 1]}}
  c: {{levels: [0, 1]}}
  d: {{levels: [0, 1]}}
fraction: [{generator}]
seeds: 2
"""


def _runs(generator: str) -> set[tuple[int, ...]]:
    design = spec.parse_design(DESIGN.format(generator=f'"{generator}"'))
    return {tuple(int(run[f] == "1") for f in "abcd") for run in spec.factorial_runs(design)}


@pytest.mark.parametrize("generator, sign", [("d = a*b*c", 1), ("d = -a*b*c", -1)])
def test_runs_are_the_half_where_the_defining_word_has_the_sign(generator, sign):
    # brute force: the runs of the full 2^4 product where the coded product abcd = sign
    expected = {levels for levels in itertools.product((0, 1), repeat=4)
                if (-1) ** sum(1 - x for x in levels) == sign}
    assert _runs(generator) == expected
    coded = stats.fractional_factorial(list("abcd"), generators=[generator]).runs
    assert {tuple(int(x > 0) for x in row) for row in coded.tolist()} == expected


def test_a_bad_generator_is_named_with_its_line():
    with pytest.raises(LabcoatError, match=r"<design>:10: generator 'd = a\*e': 'e' is not"):
        spec.parse_design(DESIGN.format(generator='"d = a*e"'))
