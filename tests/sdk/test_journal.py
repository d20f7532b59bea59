"""The journal: what a killed writer leaves behind is read safely and exactly once."""

import json

from labcoat.sdk import JournalWriter, read_journal


def test_records_round_trip_and_offsets_never_repeat(tmp_path):
    path = tmp_path / "j.jsonl"
    writer = JournalWriter(path)
    writer.write({"kind": "log", "step": 1, "metrics": {"loss": 2.0}})
    first = read_journal(path)
    writer.write({"kind": "log", "step": 2, "metrics": {"loss": float("nan")}})
    writer.close()
    second = read_journal(path, first.offset, first.line)
    assert [r["step"] for _, r in first.records] == [1]
    assert [(line, r["step"]) for line, r in second.records] == [(2, 2)]
    assert second.records[0][1]["metrics"]["loss"] != second.records[0][1]["metrics"]["loss"]
    assert read_journal(path, second.offset, second.line).records == []


def test_partial_last_line_is_left_for_later(tmp_path):
    path = tmp_path / "j.jsonl"
    complete = json.dumps({"kind": "log", "step": 1, "metrics": {"a": 1}})
    path.write_text(complete + "\n" + '{"kind": "log", "st')
    chunk = read_journal(path)
    assert len(chunk.records) == 1 and chunk.bad_lines == []
    assert chunk.offset == len(complete) + 1
    with open(path, "a") as f:  # the writer finishes its line
        f.write('ep": 2, "metrics": {"a": 2}}\n')
    later = read_journal(path, chunk.offset, chunk.line)
    assert [(line, r["step"]) for line, r in later.records] == [(2, 2)]


def test_garbage_lines_are_reported_with_line_numbers(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"kind": "log", "step": 1, "metrics": {}}\n\xff\xfe junk\n[1, 2]\n')
    chunk = read_journal(path)
    assert [line for line, _ in chunk.records] == [1]
    assert [line for line, _ in chunk.bad_lines] == [2, 3]
    assert "not JSON" in chunk.bad_lines[0][1]
    assert "kind" in chunk.bad_lines[1][1]


def test_missing_journal_reads_as_empty(tmp_path):
    chunk = read_journal(tmp_path / "absent.jsonl")
    assert chunk.records == [] and chunk.offset == 0
