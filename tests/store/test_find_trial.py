"""One lookup of a trial by key (store.find_trial), one message listing the keys there are,
for every verb that names a trial (issue 36, point 1)."""

import pytest

from helpers import cli, fake_design
from labcoat import store


@pytest.fixture
def two_trials(home, tmp_path):
    cli("run", str(fake_design(tmp_path, steps=1, seeds=1)), check=True)
    return "fake"


def test_every_verb_that_names_a_trial_says_the_same_thing(two_trials):
    with store.open_store().session() as s:
        exp = store.find_experiment(s, two_trials)
        keys = sorted(t.key for t in exp.trials)
        assert store.find_trial(exp, keys[0]).key == keys[0]
        with pytest.raises(store.TrialNotFound) as raised:
            store.find_trial(exp, "nope")
    message = str(raised.value)
    assert f"has no trial 'nope' (trials: {', '.join(keys)})" in message
    for args in (("diagnose", "fake/nope"), ("logs", "fake", "--trial", "nope"),
                 ("rerun", "fake/nope"), ("replay", "fake/nope", "--from", "1", "--to", "2")):
        done = cli(*args)
        assert done.returncode == 2 and message in done.stderr.replace("\n", ""), (args, done)
