"""One table of corrections (stats.CORRECTIONS) that the design schema, `adjust`, power
planning and the reports read (issue 36, point 1). Adding a method is one entry there
plus its row in STATSMODELS below."""

import typing

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from labcoat import spec, stats

STATSMODELS = {"holm": "holm", "bh": "fdr_bh", "bonferroni": "bonferroni"}


@pytest.mark.parametrize("method", [m for m in stats.CORRECTIONS if m != "none"])
def test_every_correction_adjusts_p_like_statsmodels(method):
    p = np.random.default_rng(7).uniform(0, 0.2, size=9)
    expected = multipletests(p, method=STATSMODELS[method])[1]
    np.testing.assert_allclose(stats.CORRECTIONS[method].adjust_p(p), expected, rtol=1e-12)


def test_the_design_accepts_exactly_the_corrections_stats_knows():
    field = spec.Design.model_fields["correction"].annotation
    assert set(typing.get_args(field)) == set(stats.CORRECTIONS)


def test_an_unknown_method_lists_the_known_ones():
    with pytest.raises(ValueError, match="choose one of holm, bh, bonferroni, none"):
        stats.adjust([], "sidak")
