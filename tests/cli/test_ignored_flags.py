"""A flag `labcoat run` would not use is refused, never silently ignored (issue 30)."""

import pytest

from helpers import cli, fake_design


@pytest.mark.parametrize("flag", [["--max-seeds", "8"], ["--round-size", "2"]])
def test_sequential_flags_without_until_decisive_are_refused(home, tmp_path, flag):
    done = cli("run", str(fake_design(tmp_path, steps=1, seeds=1)), *flag)
    assert done.returncode == 2
    assert f"{flag[0]} sets how a sequential run adds seeds; it needs --until-decisive" \
        in " ".join(done.stderr.split())
    assert not (home / "labcoat.db").exists()  # refused before anything ran


def test_report_help_names_the_ui_extra():
    assert "needs the ui extra" in " ".join(cli("report", "--help").stdout.split())
