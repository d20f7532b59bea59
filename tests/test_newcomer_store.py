"""Read verbs run from a directory with no store: they name the store they looked in and
create nothing there (issue 22, point 6)."""

from helpers import cli, fake_design


def test_reading_from_another_directory_names_the_store_and_creates_nothing(
        tmp_path, monkeypatch):
    monkeypatch.delenv("LABCOAT_HOME", raising=False)  # the default: ./.labcoat
    monkeypatch.delenv("LABCOAT_DB", raising=False)
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    design = fake_design(project, steps=2, seeds=1)
    cli("run", str(design), cwd=project, check=True)
    assert (project / ".labcoat" / "labcoat.db").is_file()
    elsewhere.mkdir()
    looked_in = elsewhere / ".labcoat" / "labcoat.db"
    for verb in (("report", "fake"), ("status", "fake"), ("show", "fake")):
        result = cli(*verb, cwd=elsewhere)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"no experiment named 'fake' in the store {looked_in} " in result.stderr
        assert "Traceback" not in result.stderr
    assert f"no experiments yet in {looked_in}" in " ".join(
        cli("status", cwd=elsewhere, check=True).stdout.split())
    cli("lint", str(design), cwd=elsewhere)  # lint reads the store for pilots (1 seed: exit 1)
    assert list(elsewhere.iterdir()) == []  # no ./.labcoat left behind
    assert "fake" in cli("status", cwd=project, check=True).stdout  # the store still reads
