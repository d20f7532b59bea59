"""Contamination scanner: against a brute-force set of n-gram strings, CLI, bad inputs."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest
from tests.helpers import cli, fake_design

from labcoat import review
from labcoat.errors import LabcoatError
from labcoat.evals import EvalItem, load_eval_items, normalize_text, scan_contamination
from labcoat.evals._ngrams import (
    Hasher,
    normalize_ascii,
    normalize_prepared,
    normalize_string,
    prepare,
)

WORDS = ["alpha", "Beta", "gamma,", "delta.", "it's", "state-of-the-art", "x", "Q&A", "42",
         "Ωmega", "café", "ｆｕｌｌ", "naïve", "ﬁne", "STRASSE", "über", "«quoted»", "—", "...",
         "supercalifragilisticexpialidocious", "https://example.org/" + "x" * 60,
         "y" * 64, "eightchr", "sixteen-chars-ok"]
SPACES = [" ", " ", " ", "\n", "\t", "  ", "\u00a0", "\u3000", " \r\n"]


def _text(rng: random.Random, words: int, ascii_only: bool = False) -> str:
    vocab = [w for w in WORDS if w.isascii()] if ascii_only else WORDS
    out = []
    for _ in range(words):
        out.append(rng.choice(vocab))
        out.append(rng.choice(SPACES[:6] if ascii_only else SPACES))
    return "".join(out)


def _reference(items: list[EvalItem], documents: list[str], n: int, min_n: int
               ) -> dict[tuple[str, str], int]:
    """Brute force: item -> number of its distinct n-grams found in any document."""
    item_words = [normalize_text(i.input).split() for i in items]
    sizes = {}
    for task in {i.task for i in items}:
        lengths = [len(w) for w, i in zip(item_words, items, strict=True) if i.task == task]
        sizes[task] = max(min(int(np.percentile(lengths, 5, method="lower")), n), min_n)
    needed = {min(sizes[i.task], len(w)) for i, w in zip(items, item_words, strict=True)}
    train: set[str] = set()
    for doc in documents:
        words = normalize_text(doc).split()
        for size in needed:
            train.update(" ".join(words[k:k + size]) for k in range(len(words) - size + 1))
    found = {}
    for item, words in zip(items, item_words, strict=True):
        size = min(sizes[item.task], len(words))
        grams = {" ".join(words[k:k + size]) for k in range(len(words) - size + 1)} if size \
            else set()
        found[(item.task, item.id)] = len(grams & train)
    return found


def _planted_corpus(rng: random.Random, items: list[EvalItem], ascii_only: bool
                    ) -> list[str]:
    """Documents of random text with some items (whole or in part) planted inside."""
    docs = []
    for _ in range(6):
        parts = [_text(rng, rng.randint(50, 400), ascii_only)]
        for item in rng.sample(items, 3):
            words = item.input.split()
            start = rng.randint(0, max(0, len(words) - 10))
            parts.append(" ".join(words[start:start + rng.randint(5, 20)]))
            parts.append(_text(rng, rng.randint(0, 30), ascii_only))
        docs.append(" ".join(parts))
    return docs


def _items(rng: random.Random, ascii_only: bool) -> list[EvalItem]:
    items = [EvalItem(task="long", id=f"l{k}", input=_text(rng, rng.randint(14, 40), ascii_only))
             for k in range(12)]
    items += [EvalItem(task="short", id=f"s{k}", input=_text(rng, rng.randint(1, 11), ascii_only))
              for k in range(8)]
    return items


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ascii_only", [True, False])
def test_plain_text_matches_brute_force_across_blocks(tmp_path: Path, seed: int,
                                                      ascii_only: bool) -> None:
    rng = random.Random(seed)
    items = _items(rng, ascii_only)
    docs = _planted_corpus(rng, items, ascii_only)
    stream = " ".join(docs)  # one plain-text stream: n-grams may span documents
    path = tmp_path / "train.txt"
    path.write_text(stream, encoding="utf-8")
    expected = _reference(items, [stream], 13, 8)
    # Tiny blocks put many n-grams across block boundaries.
    for block_bytes in (64, 1000, 1 << 20):
        report = scan_contamination([path], items, block_bytes=block_bytes)
        got = {(r.task, r.id): r.matched for r in report.items}
        assert got == expected, block_bytes
        assert report.bytes_scanned == path.stat().st_size
    assert any(expected.values()) and not all(expected.values())


@pytest.mark.parametrize("seed", range(4))
def test_jsonl_documents_do_not_share_ngrams(tmp_path: Path, seed: int) -> None:
    rng = random.Random(100 + seed)
    items = _items(rng, ascii_only=seed % 2 == 0)
    docs = _planted_corpus(rng, items, ascii_only=seed % 2 == 0)
    # Split an item across two records: it must not count as a match across them.
    words = items[0].input.split()
    docs += [" ".join(words[:7]), " ".join(words[7:])]
    path = tmp_path / "train.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc, "meta": 1}) + "\n\n")
    expected = _reference(items, docs, 13, 8)
    for block_bytes in (100, 1 << 20):
        report = scan_contamination([path], items, block_bytes=block_bytes)
        assert {(r.task, r.id): r.matched for r in report.items} == expected
        assert report.bytes_scanned == len(gzip.decompress(path.read_bytes()))


def test_ascii_and_unicode_paths_agree_with_normalize_text() -> None:
    rng = random.Random(7)
    hasher = Hasher()
    for _ in range(50):
        text = _text(rng, rng.randint(0, 30), ascii_only=True) + "\x1c~_`|$ A"
        ascii_buf = normalize_ascii(text.encode())
        utf8_buf = normalize_prepared([prepare(text).encode()])[0]
        assert bytes(ascii_buf).decode().split() == normalize_text(text).split()
        assert np.array_equal(hasher.words(ascii_buf)[2], hasher.words(utf8_buf)[2])
    assert normalize_text("Ｈｅｌｌｏ,  “World”! It’s ﬁne — café\u00a0Ⅻ") == \
        "hello world its fine café xii"


def test_any_unicode_normalizes_like_the_reference() -> None:
    rng = random.Random(3)
    pools = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x300, 0x370), range(0x2000, 0x2070),
             range(0x3000, 0x3040), range(0xFF00, 0xFF70), range(0x1F600, 0x1F650),
             [0x85, 0x1C, 0x2028, 0x3A3, 0x130, 0xFB01, 0x1E9E]]
    for _ in range(300):
        text = "".join(chr(rng.choice(rng.choice(pools))) for _ in range(rng.randint(0, 60)))
        buf = normalize_string(text)
        assert bytes(buf).decode().split() == normalize_text(text).split(), repr(text)


@pytest.mark.parametrize(("filler", "repeat", "block_bytes"), [
    ("Ünïcode filler words here. ", 50, 100), ("Ünïcode filler words here. ", 3000, 1 << 18),
    ("ascii filler words here. ", 50, 100), ("ascii filler words here. ", 3000, 1 << 18)])
def test_where_and_what_are_reported(tmp_path: Path, filler: str, repeat: int,
                                     block_bytes: int) -> None:
    item = EvalItem(task="t", id="q1", input="the quick brown fox jumps over the lazy dog "
                    "near the quiet river bank today")
    prefix = filler * repeat  # 3000 repeats: several sub-blocks before the match
    path = tmp_path / "t.txt"
    path.write_text(prefix + "THE QUICK, brown fox jumps over the lazy dog near the quiet "
                    "river bank today!", encoding="utf-8")
    report = scan_contamination([path], [item], block_bytes=block_bytes)
    (result,) = report.items
    assert result.contaminated and result.n == 13 and result.ngrams == 3 and result.matched == 3
    assert result.fraction == 1.0
    assert result.example is not None
    assert result.example.offset == len(prefix.encode())
    assert result.example.text == "the quick brown fox jumps over the lazy dog near the quiet river"
    assert report.tasks[0].rate == 1.0
    assert report.bytes_scanned == path.stat().st_size


def test_short_items_use_shorter_n_and_whole_items(tmp_path: Path) -> None:
    items = [EvalItem(task="t", id=str(k), input=" ".join(f"k{k}w{j}" for j in range(10)))
             for k in range(39)]
    items.append(EvalItem(task="t", id="tiny", input="One, two!"))
    (tmp_path / "a.txt").write_text(
        "zero " + items[3].input + " nine " + " ".join(items[4].input.split()[:9]) + " one two",
        encoding="utf-8")
    report = scan_contamination([tmp_path], items)
    by_id = {r.id: r for r in report.items}
    assert report.tasks[0].n == 10  # 5th percentile of the lengths, within [8, 13]
    assert by_id["3"].contaminated and by_id["3"].ngrams == 1
    assert not by_id["4"].contaminated  # 9 of its 10 words: no 10-gram
    assert by_id["tiny"].n == 2 and by_id["tiny"].contaminated  # shorter than n: whole item


def test_hash_collisions_are_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every word hashes alike: every n-gram is a candidate, none may be reported falsely.
    monkeypatch.setattr("labcoat.evals._ngrams._mix", lambda h: np.zeros_like(h))
    item = EvalItem(task="t", id="a", input="a b c d e f g h i j k l m")
    path = tmp_path / "t.txt"
    path.write_text("z y x w v u t s r q p o n m " * 20 + "a b c d e f g h i j k l m",
                    encoding="utf-8")
    (result,) = scan_contamination([path], [item], block_bytes=64).items
    assert result.matched == 1 and result.example is not None
    path.write_text("z y x w v u t s r q p o n m " * 20, encoding="utf-8")
    (result,) = scan_contamination([path], [item], block_bytes=64).items
    assert not result.contaminated


def _suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    long_items = [{"id": f"q{k}", "input": f"question {k} asks about the {k} th planet of the "
                   f"solar system and its many moons", "target": str(k)} for k in range(6)]
    (suite / "astro.jsonl").write_text("".join(json.dumps(r) + "\n" for r in long_items),
                                       encoding="utf-8")
    (suite / "math.csv").write_text("id,input,target\nm1,what is two plus two,4\n"
                                    "m2,what is three plus five,8\n", encoding="utf-8")
    return suite


def test_suite_directory_and_score_comparison(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    items = load_eval_items(suite)
    assert [i.task for i in items] == ["astro"] * 6 + ["math"] * 2
    train = tmp_path / "train.txt"
    train.write_text("Question 0 asks about the 0 th planet of the solar system and its many "
                     "moons. question 1 asks about the 1 th planet of the solar system and its "
                     "many moons; what is two plus two", encoding="utf-8")
    scores = tmp_path / "scores.csv"
    scores.write_text("task,item,score\n" + "".join(
        f"astro,q{k},{1 if k < 2 else 0}\n" for k in range(6)) + "math,m1,1\nmath,m2,0\n",
        encoding="utf-8")
    report = scan_contamination([train], suite, scores=scores)
    assert [r.id for r in report.contaminated] == ["q0", "q1", "m1"]
    overall = report.scores[0]
    assert (overall.task, overall.clean, overall.contaminated) == ("all", 5, 3)
    assert overall.contaminated_mean == 1.0 and overall.clean_mean == 0.0
    assert overall.difference is not None and overall.difference.estimate == 1.0
    json.dumps(report.as_dict())


def test_cli_table_and_json(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"text": "question 3 asks about the 3 th planet of the solar "
                                 "system and its many moons"}) + "\n", encoding="utf-8")
    result = cli("contamination", "--train", str(train), "--eval", str(suite), "--json",
                 check=True)
    data = json.loads(result.stdout)
    dirty = [i for i in data["items"] if i["contaminated"]]
    assert [i["id"] for i in dirty] == ["q3"]
    assert dirty[0]["example"]["line"] == 1 and dirty[0]["example"]["offset"] == 0
    assert {t["task"]: t["rate"] for t in data["tasks"]} == {"astro": 1 / 6, "math": 0.0}
    text = cli("contamination", "--train", str(train), "--eval", str(suite), check=True).stdout
    assert "q3" in text and "astro" in text


@pytest.mark.parametrize(("write", "args", "message"), [
    (lambda d: None, ["--train", "missing.txt"], "missing.txt: no such training file"),
    (lambda d: (d / "t.jsonl").write_text('{"text": "a"}\n{oops\n'), ["--train", "t.jsonl"],
     "t.jsonl:2: not valid JSON"),
    (lambda d: (d / "t.jsonl").write_text('{"body": "a"}\n'), ["--train", "t.jsonl"],
     "t.jsonl:1: no 'text' field (found: body); name the text field with --text-field"),
    (lambda d: (d / "t.txt").write_text("a"), ["--train", "t.txt", "--n", "0"],
     "--n 0: the n-gram length must be at least 1"),
    (lambda d: (d / "t.txt").write_bytes(b"caf\xe9 au lait"), ["--train", "t.txt"],
     "t.txt: not UTF-8 text at byte 3"),
])
def test_cli_bad_inputs(tmp_path: Path, write, args: list[str], message: str) -> None:
    suite = _suite(tmp_path)
    write(tmp_path)
    result = cli("contamination", *args, "--eval", str(suite), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_bad_eval_suite(tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text('{"id": "a", "input": "x"}\n{"input": "y"}\n', encoding="utf-8")
    with pytest.raises(LabcoatError, match=r"suite.jsonl:2: missing 'id'"):
        load_eval_items(path)
    with pytest.raises(LabcoatError, match="no such file"):
        load_eval_items(tmp_path / "nope.jsonl")
    with pytest.raises(LabcoatError, match="n=0"):
        scan_contamination([path], path, n=0)


def test_design_review_flags_eval_items_in_training_data(tmp_path: Path) -> None:
    _suite(tmp_path)
    (tmp_path / "web.txt").write_text("Question 2 asks about the 2 th planet of the solar "
                                      "system and its many moons", encoding="utf-8")
    (tmp_path / "clean.txt").write_text("nothing to see here", encoding="utf-8")
    design = fake_design(tmp_path)
    base = design.read_text(encoding="utf-8")

    def rules(data: str) -> dict[str, str]:
        design.write_text(base + data, encoding="utf-8")
        return {f.rule: f.message for f in review.lint(design)
                if f.rule.startswith(("eval-contaminated", "contamination"))}

    found = rules("data: {train: [web.txt], eval: suite}\n")
    assert list(found) == ["eval-contaminated"]
    assert "task 'astro': 1 of 6 eval items (17%)" in found["eval-contaminated"]
    assert "item 'q2'" in found["eval-contaminated"]
    assert rules("data: {train: [clean.txt], eval: suite}\n") == {}
    assert rules("") == {}
    assert "missing.txt" in rules("data: {train: [missing.txt], eval: suite}\n")[
        "contamination-unchecked"]
    assert "contamination-unchecked" in rules("data: {train: [web.txt]}\n")
