"""Issue 30: the first verbs a new user types end in one clear line, never a traceback."""

from __future__ import annotations

from pathlib import Path

from helpers import cli


def _one_error_line(done) -> str:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_init_onto_a_file_says_it_is_a_file(home, tmp_path):
    existing = tmp_path / "notes.txt"
    existing.write_text("mine\n")
    line = _one_error_line(cli("init", str(existing)))
    assert line == (f"error: {existing} is a file, not a directory; `labcoat init DIRECTORY` "
                    "writes design.yaml inside DIRECTORY: give a new or existing directory")
    assert existing.read_text() == "mine\n"  # untouched


def test_init_under_a_file_or_a_path_that_cannot_be_made_names_it(home, tmp_path):
    existing = tmp_path / "notes.txt"
    existing.write_text("")
    line = _one_error_line(cli("init", str(existing / "exp")))
    assert line == (f"error: cannot write {existing / 'exp' / 'design.yaml'}: Not a directory "
                    f"({existing / 'exp'}); choose a directory you can write")
    line = _one_error_line(cli("init", "/proc/labcoat-exp"))
    assert line.startswith("error: cannot write /proc/labcoat-exp/design.yaml: ")
    assert line.endswith("; choose a directory you can write")


def test_init_twice_refuses_the_second_and_keeps_the_first(home, tmp_path):
    first = cli("init", str(tmp_path / "exp"), check=True)
    assert "wrote" in first.stdout
    (tmp_path / "exp" / "design.yaml").write_text("name: edited\n")
    line = _one_error_line(cli("init", str(tmp_path / "exp")))
    assert line.endswith("design.yaml already exists; choose another directory or remove it")
    assert (tmp_path / "exp" / "design.yaml").read_text() == "name: edited\n"


def test_scaling_fit_on_an_empty_csv_says_it_is_empty(home, tmp_path):
    for name, content in (("empty.csv", ""), ("blank.csv", "\n\n  \n")):
        path = tmp_path / name
        path.write_text(content)
        line = _one_error_line(cli("scaling", "fit", str(path), "--n", "N", "--loss", "L"))
        assert line.startswith(f"error: {path} is empty; it needs a header row naming the "
                               "columns"), line


def test_scaling_fit_on_a_directory_or_missing_file_names_it(home, tmp_path):
    line = _one_error_line(cli("scaling", "fit", str(tmp_path), "--n", "N", "--loss", "L"))
    assert line == f"error: {tmp_path} is a directory; give a CSV file"
    missing = Path(tmp_path / "nope.csv")
    line = _one_error_line(cli("scaling", "fit", str(missing), "--n", "N", "--loss", "L"))
    assert line.startswith(f"error: {missing} not found")
