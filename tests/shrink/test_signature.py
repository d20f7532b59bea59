"""When two failures are the same for shrink: the rule (the guard's nonfinite.* rules as one),
at a comparable relative step, allowing the rule's check interval as lag."""

from labcoat.shrink import Signature


def _guard(rule: str, step: int, total: int, every: int = 0) -> Signature:
    return Signature("guard", rule, step, step / total, every / total)


def test_a_nan_seen_in_the_loss_or_in_a_gradient_is_one_failure():
    assert _guard("nonfinite.loss", 50, 100).same(_guard("nonfinite.grad", 500, 1000), 0.35)
    assert not _guard("nonfinite.loss", 50, 100).same(_guard("model.causality", 50, 100), 0.35)
    assert not Signature("cause", "nan", 50, 0.5).same(_guard("nonfinite.loss", 50, 100), 0.35)


def test_the_relative_step_must_agree_within_the_tolerance():
    parent = _guard("model.causality", 500, 1000, every=4)
    assert _guard("model.causality", 70, 100, every=4).same(parent, 0.35)  # 0.2 + 0.04 lag
    assert not _guard("model.causality", 90, 100, every=4).same(parent, 0.35)  # 0.4 + 0.04
    assert not _guard("model.causality", 10, 100, every=4).same(parent, 0.35)  # far earlier


def test_a_probe_every_4_steps_may_see_it_half_a_run_of_8_late():
    parent = _guard("model.causality", 500, 1000, every=4)
    assert _guard("model.causality", 8, 8, every=4).same(parent, 0.35)  # lag 4/8
    assert not _guard("model.causality", 8, 8, every=1).same(parent, 0.35)  # lag 1/8
