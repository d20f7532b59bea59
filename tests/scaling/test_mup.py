"""tinylm's muP option (Yang et al. 2022, Tensor Programs V, Table 8) and its coordinate check.

The references are the paper's rules, checked parameter by parameter, and the
coordinate check's defining property: under muP, activations after a few Adam
updates do not grow with width, while under the standard parametrization they do.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from labcoat.workloads.tinylm import Config, build_model, build_optimizer  # noqa: E402
from labcoat.workloads.tinylm._mup import coord_check, mup_model_options  # noqa: E402

HIDDEN = ("attn.qkv.weight", "attn.proj.weight", "mlp.up.weight", "mlp.down.weight")


def test_mup_equals_standard_scales_at_the_base_width() -> None:
    options = mup_model_options(64, 4, base_width=64)
    assert options["attn_scale"] == pytest.approx(1 / math.sqrt(16))
    assert options["output_mult"] == 1.0
    wide = mup_model_options(256, 4, base_width=64)
    assert wide["attn_scale"] == pytest.approx(math.sqrt(16) / 64)  # 1/d, times sqrt(d_base)
    assert wide["output_mult"] == pytest.approx(0.25)


def test_mup_learning_rates_and_init_follow_table_8() -> None:
    cfg = dict(width=128, depth=2, heads=4, lr=0.01, weight_decay=0.1, steps=10)
    mup = Config(**cfg, parametrization="mup", mup_base_width=32)
    std = Config(**cfg)
    model, ref = build_model(mup), build_model(std)
    groups = build_optimizer(model, mup).param_groups
    lr_of = {id(p): (g["lr"], g["weight_decay"]) for g in groups for p in g["params"]}
    for name, p in model.named_parameters():
        lr, wd = lr_of[id(p)]
        if name.endswith(HIDDEN):  # hidden matrices: lr / width_mult, wd * width_mult
            assert (lr, wd) == (pytest.approx(0.01 / 4), pytest.approx(0.1 * 4)), name
        else:  # embeddings (tied readout), biases, LayerNorms: unchanged
            assert lr == pytest.approx(0.01), name
    ref_params = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        if name.endswith(("mlp.up.weight", "attn.proj.weight")):  # init std / sqrt(width_mult)
            assert p.std().item() == pytest.approx(ref_params[name].std().item() / 2, rel=0.05)
        if name.endswith("attn.qkv.weight"):  # the query starts at zero
            assert torch.count_nonzero(p[:128]).item() == 0
            assert torch.count_nonzero(p[128:]).item() > 0


def test_coordinate_check_is_flat_under_mup_and_grows_under_standard() -> None:
    widths = (32, 64, 128, 256)
    mup = coord_check(widths, parametrization="mup", steps=5, lr=1e-3)
    std = coord_check(widths, parametrization="standard", steps=5, lr=1e-3)
    for layer in ("block0", "block1", "block1.mlp", "logits"):
        # log-log slope of mean |activation| vs width after 5 updates: ~0 is flat.
        assert abs(mup.slope(layer)) < 0.2, (layer, mup.table())
        assert std.slope(layer) > 0.5, (layer, std.table())
    assert mup.growth("block1") < 1.5 < std.growth("block1")
