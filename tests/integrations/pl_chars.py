"""A 2-layer causal transformer learns to continue letter runs ("dfhjl..."), trained by
Lightning and recorded by labcoat: the example of docs/integrations-lightning.md (tested as is).

    python pl_chars.py --lr 3e-3 --seed 0 --steps 40          # ad hoc
"""

import argparse
import random

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F

from labcoat.integrations.lightning import LabcoatCallback

LETTERS = "abcdefghijklmnopqrstuvwxyz"  # the character tokenizer: letter i is token i
LENGTH = 16  # characters per row


def letter_runs(n: int, seed: int) -> torch.Tensor:
    """(n, LENGTH) token ids: from a random letter, a random stride of 1-3 letters."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        start, stride = rng.randrange(26), rng.choice((1, 2, 3))
        text = "".join(LETTERS[(start + stride * i) % 26] for i in range(LENGTH))
        rows.append([LETTERS.index(c) for c in text])
    return torch.tensor(rows)


class Rows(torch.utils.data.Dataset):
    """(inputs, next letters, row id): the labels are shifted here, not by the loss."""

    def __init__(self, ids: torch.Tensor) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.ids[i, :-1], self.ids[i, 1:], i


class TinyLM(pl.LightningModule):
    def __init__(self, lr: float, width: int = 32) -> None:
        super().__init__()
        self.lr = lr
        self.embed = nn.Embedding(26, width)
        self.position = nn.Parameter(torch.randn(LENGTH, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, nhead=2, dim_feedforward=2 * width,
                                           dropout=0.1, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(width, 26)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        h = self.embed(x) + self.position[: x.shape[1]]
        return self.head(self.blocks(h, mask=causal, is_causal=True))

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = F.cross_entropy(self(x).flatten(0, 1), y.flatten())
        self.log("loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, _ = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits.flatten(0, 1), y.flatten()))
        # per row: the share of letters after the first two predicted right
        return {"scores": (logits.argmax(-1)[:, 1:] == y[:, 1:]).double().mean(dim=1)}

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def next_letter_accuracy(outputs, batch):
    return "letter_runs", [f"row{i}" for i in batch[2].tolist()], outputs["scores"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", default="pl-out")
    args = parser.parse_args()

    pl.seed_everything(args.seed)  # before building the module: its weights follow the seed
    train = torch.utils.data.DataLoader(Rows(letter_runs(160, seed=1)), batch_size=16,
                                        shuffle=True)  # 10 batches: an epoch every 10 steps
    val = torch.utils.data.DataLoader(Rows(letter_runs(32, seed=2)), batch_size=32)
    trainer = pl.Trainer(
        max_steps=args.steps, default_root_dir=args.out, accelerator="cpu", logger=False,
        log_every_n_steps=1, val_check_interval=args.steps // 2, check_val_every_n_epoch=None,
        enable_progress_bar=False, enable_model_summary=False,
        callbacks=[pl.callbacks.ModelCheckpoint(every_n_train_steps=10, save_top_k=-1),
                   LabcoatCallback(eval_items=next_letter_accuracy)])
    trainer.fit(TinyLM(args.lr), train, val)


if __name__ == "__main__":
    main()
