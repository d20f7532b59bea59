"""Probes with a planted label (Hewitt & Liang 2019's control task).

Each item has a word type (40 types) and a label that is a function of its type. One
layer holds a random embedding of the type (a probe can memorize any type -> label map
there: high accuracy on the task *and* on the control task, low selectivity); another
holds the label alone (high accuracy, control at chance: selective). The variant's
label layer is drowned in noise, which the between-arm difference must show."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from labcoat import inside

TYPES, ITEMS, WIDTH = 40, 800, 16


class Planted(nn.Module):
    def __init__(self, label_noise: float) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.register_buffer("table", torch.randn(TYPES, WIDTH, generator=gen))
        self.register_buffer("direction", torch.randn(WIDTH, generator=gen))
        self.label_noise = label_noise
        self.by_type = nn.Identity()
        self.by_label = nn.Identity()

    def forward(self, batch):
        types, labels, noise = batch
        self.by_type(self.table[types][:, None] + 0.1 * noise[0])
        signal = (2 * labels.float() - 1)[:, None, None] * self.direction
        self.by_label(signal + self.label_noise * noise[1])
        return torch.zeros(len(types))


@pytest.fixture(scope="module")
def items():
    rng = np.random.default_rng(0)
    types = rng.integers(0, TYPES, ITEMS)
    label_of_type = rng.integers(0, 2, TYPES)
    labels = label_of_type[types]
    noise = torch.from_numpy(rng.normal(size=(2, ITEMS, 1, WIDTH))).float()
    batch = (torch.from_numpy(types), torch.from_numpy(labels), noise)
    return batch, labels, types


def test_control_labels_are_one_random_label_per_type_from_the_label_frequencies():
    labels = np.array(["a"] * 90 + ["b"] * 10)
    types = np.arange(100) % 50
    control = inside.control_labels(labels, types, seed=1)
    for t in range(50):
        assert len(set(control[types == t])) == 1
    assert 0.7 < np.mean(control == "a") < 1.0  # drawn at the labels' 90/10 frequencies
    assert (control == inside.control_labels(labels, types, seed=1)).all()


def test_selectivity_separates_memorizing_from_encoding_and_the_arms_differ(items):
    batch, labels, types = items
    result = inside.probe_arms(
        [(Planted(label_noise=0.3), Planted(label_noise=8.0))], [batch],
        lambda model, b: model(b), labels, types, ["by_type", "by_label"],
        lambda b: torch.zeros(len(b[0]), dtype=torch.long), inside.ProbeConfig(reps=1000),
        label="planted")
    by = {layer.layer: layer for layer in result.layers}
    memorizing, encoding = by["by_type"].control, by["by_label"].control
    assert memorizing.accuracy.low > 0.8 and memorizing.control_task.low > 0.75
    assert memorizing.selectivity.high < 0.2  # accurate, but so is the control task
    assert encoding.accuracy.low > 0.9 and encoding.control_task.high < 0.7
    assert encoding.selectivity.low > memorizing.selectivity.high + 0.1
    # the variant lost the label layer's signal; its type layer is the same
    assert by["by_label"].accuracy_difference.high < -0.2
    assert by["by_label"].selectivity_difference.high < 0
    assert abs(by["by_type"].accuracy_difference.estimate) < 0.05
    assert result.chance == pytest.approx(max(np.mean(labels), 1 - np.mean(labels)))


def test_held_out_accuracy_equals_sklearn_cross_val_predict(items):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import KFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    batch, labels, _ = items
    x = Planted(label_noise=2.0).table[batch[0]].numpy() + batch[2][0, :, 0].numpy()
    got = inside.held_out_correct(x, labels, inside.ProbeConfig(seed=3))
    ref = cross_val_predict(make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
                            x, labels, cv=KFold(5, shuffle=True, random_state=3))
    assert (got == (ref == labels)).all()
