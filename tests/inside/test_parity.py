"""Parity: labcoat's hook-based patching between two TinyLMs equals TransformerLens's own
patching functions (`transformer_lens.patching`) on HookedTransformers holding the same
weights, to 1e-5.

TransformerLens patches a clean run's cache into a corrupted run of one model; given the
variant's cache and the control as the model, the same functions patch between arms.
TransformerLens 4.x dropped HookedTransformer, so the reference is the 3.x line
(the dev extra pins transformer-lens 3.9.0); without it these tests skip."""

from __future__ import annotations

import copy
import warnings
from importlib.metadata import version
from importlib.util import find_spec

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from labcoat import inside
from labcoat.workloads.tinylm import INSIDE, MAX_LEN, VOCAB, Config, build_model

# judged without importing it (3 s): each worker collects this module, one runs it
if find_spec("transformer_lens") is None:
    pytest.skip("needs transformer-lens 3.x (dev extra)", allow_module_level=True)
if not version("transformer-lens").startswith("3."):
    pytest.skip("transformer-lens 4.x has no HookedTransformer", allow_module_level=True)

WIDTH, HEADS, DEPTH = 32, 4, 2


def to_hooked(model: torch.nn.Module, *, attn_result: bool = False):
    """A HookedTransformer with the TinyLM's weights (GPT-2 layout, exact GELU)."""
    import transformer_lens as tl

    cfg = tl.HookedTransformerConfig(
        n_layers=DEPTH, d_model=WIDTH, n_ctx=MAX_LEN, d_head=WIDTH // HEADS, n_heads=HEADS,
        d_vocab=len(VOCAB), d_mlp=4 * WIDTH, act_fn="gelu", normalization_type="LN",
        positional_embedding_type="standard", use_attn_result=attn_result, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        hooked = tl.HookedTransformer(cfg)
    d, h = WIDTH // HEADS, HEADS
    sd = {"embed.W_E": model.tok_emb.weight, "pos_embed.W_pos": model.pos_emb.weight,
          "ln_final.w": model.ln_f.weight, "ln_final.b": model.ln_f.bias,
          "unembed.W_U": model.head.weight.T, "unembed.b_U": torch.zeros(len(VOCAB))}
    for i, block in enumerate(model.blocks):
        p = f"blocks.{i}."
        wq, wk, wv = block.attn.qkv.weight.split(WIDTH)
        bq, bk, bv = block.attn.qkv.bias.split(WIDTH)
        for name, w, b in (("Q", wq, bq), ("K", wk, bk), ("V", wv, bv)):
            sd[p + f"attn.W_{name}"] = w.reshape(h, d, WIDTH).transpose(1, 2)
            sd[p + f"attn.b_{name}"] = b.reshape(h, d)
        sd[p + "attn.W_O"] = block.attn.proj.weight.T.reshape(h, d, WIDTH)
        sd[p + "attn.b_O"] = block.attn.proj.bias
        sd[p + "mlp.W_in"] = block.mlp.up.weight.T
        sd[p + "mlp.b_in"] = block.mlp.up.bias
        sd[p + "mlp.W_out"] = block.mlp.down.weight.T
        sd[p + "mlp.b_out"] = block.mlp.down.bias
        for ln in ("ln1", "ln2"):
            sd[p + f"{ln}.w"] = getattr(block, ln).weight
            sd[p + f"{ln}.b"] = getattr(block, ln).bias
    missing, unexpected = hooked.load_state_dict({k: v.detach().clone() for k, v in sd.items()},
                                                 strict=False)
    assert not unexpected and all(k.endswith(("mask", "IGNORE")) for k in missing), missing
    return hooked.eval()


@pytest.fixture(scope="module")
def arms():
    torch.set_num_threads(1)
    cfg = Config(width=WIDTH, heads=HEADS, depth=DEPTH, eval_items=3,
                 tasks=("copy", "agree", "add"))
    control = build_model(cfg).eval()
    variant = copy.deepcopy(control)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in variant.parameters():
            p.add_(0.5 * p.std() * torch.randn(p.shape, generator=gen))
    _, batches = INSIDE.eval_items(cfg, batch_size=64)
    (inputs, labels), = batches
    return control, variant, inputs, labels


def mean_logp(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The metric TransformerLens calls on patched logits: tinylm's, averaged over items."""
    logp = F.log_softmax(logits.float(), -1)
    picked = logp.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return ((picked * (labels != -100)).sum(1)).mean()


def test_the_hooked_copies_compute_what_tinylm_computes(arms):
    control, variant, inputs, _ = arms
    for model in (control, variant):
        with torch.no_grad():
            assert torch.allclose(to_hooked(model)(inputs), model(inputs), atol=1e-5)


def _labcoat(arms, names, position=None):
    control, variant, inputs, labels = arms
    comps = inside.resolve(control, names)
    got = inside.exact_patching(control, variant, [(inputs, labels)], INSIDE.metric, comps,
                                position=position)
    return got.mean(axis=1)  # the per-item metric, averaged as the reference's scalar


def test_heads_z_all_positions_equal_get_act_patch_attn_head_out_all_pos(arms):
    from transformer_lens import patching

    control, variant, inputs, labels = arms
    _, cache = to_hooked(variant).run_with_cache(inputs)
    ref = patching.get_act_patch_attn_head_out_all_pos(
        to_hooked(control), inputs, cache, lambda logits: mean_logp(logits, labels))
    names = [f"blocks.{i}.attn.head_input{h}" for i in range(DEPTH) for h in range(HEADS)]
    got = _labcoat(arms, names).reshape(DEPTH, HEADS)
    np.testing.assert_allclose(got, ref.numpy(), atol=1e-5, rtol=0)
    assert np.ptp(got) > 100 * 1e-5  # the patches differ far beyond the tolerance


def test_head_results_equal_generic_patching_of_hook_result(arms):
    from transformer_lens import patching

    control, variant, inputs, labels = arms
    _, cache = to_hooked(variant, attn_result=True).run_with_cache(inputs)
    ref = patching.generic_activation_patch(
        to_hooked(control, attn_result=True), inputs, cache,
        lambda logits: mean_logp(logits, labels),
        patch_setter=patching.layer_head_vector_patch_setter, activation_name="result",
        index_axis_names=("layer", "head"))
    names = [f"blocks.{i}.attn.head{h}" for i in range(DEPTH) for h in range(HEADS)]
    got = _labcoat(arms, names).reshape(DEPTH, HEADS)
    np.testing.assert_allclose(got, ref.numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["attn_out", "mlp_out", "resid_pre"])
def test_by_position_equals_get_act_patch_by_layer_and_position(arms, kind):
    from transformer_lens import patching

    control, variant, inputs, labels = arms
    _, cache = to_hooked(variant).run_with_cache(inputs)
    function = getattr(patching, f"get_act_patch_{kind}")
    ref = function(to_hooked(control), inputs, cache, lambda logits: mean_logp(logits, labels))
    module = {"attn_out": "blocks.{}.attn", "mlp_out": "blocks.{}.mlp",
              # the residual stream entering block i: the embeddings' dropout (identity in
              # eval) for block 0, the previous block's output after that
              "resid_pre": "dropout"}[kind]
    got = np.empty(ref.shape)
    for layer in range(DEPTH):
        name = (module.format(layer) if kind != "resid_pre" else
                "dropout" if layer == 0 else f"blocks.{layer - 1}:output")
        for pos in range(inputs.shape[1]):
            got[layer, pos] = _labcoat(arms, [name], position=pos)[0]
    np.testing.assert_allclose(got, ref.numpy(), atol=1e-5, rtol=0)
