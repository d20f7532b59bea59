"""A 2-layer GPT-2 learns to continue letter runs ("dfhjl..."), trained by Hugging Face Trainer
and recorded by labcoat: the example of docs/integrations-transformers.md (tested as is).

    python hf_chars.py --lr 3e-3 --seed 0 --steps 40          # ad hoc
    labcoat run design.yaml                                    # 2 arms x 3 seeds, a verdict
"""

import argparse
import random

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed

from labcoat.integrations.transformers import LabcoatCallback

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
    def __init__(self, ids: torch.Tensor) -> None:
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}  # the model shifts labels


def next_letter_accuracy(pred):
    """Per eval row: the share of letters after the first two predicted right."""
    guess, truth = pred.predictions[:, 1:-1], pred.label_ids[:, 2:]
    scores = (guess == truth).mean(axis=1)
    return "letter_runs", [f"row{i}" for i in range(len(scores))], scores


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", default="hf-out")
    args = parser.parse_args()

    set_seed(args.seed)  # before building the model: its initial weights follow the seed
    model = GPT2LMHeadModel(GPT2Config(vocab_size=26, n_positions=LENGTH, n_embd=32,
                                       n_layer=2, n_head=2, bos_token_id=None,
                                       eos_token_id=None))
    training = TrainingArguments(
        output_dir=args.out, max_steps=args.steps, learning_rate=args.lr, seed=args.seed,
        per_device_train_batch_size=16, logging_steps=1, save_steps=10, save_total_limit=2,
        eval_strategy="steps", eval_steps=args.steps // 2, report_to="none", use_cpu=True,
        disable_tqdm=True)
    trainer = Trainer(
        model=model, args=training,
        train_dataset=Rows(letter_runs(512, seed=1)), eval_dataset=Rows(letter_runs(32, seed=2)),
        preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1),
        callbacks=[LabcoatCallback(eval_items=next_letter_accuracy)])
    trainer.train()


if __name__ == "__main__":
    main()
