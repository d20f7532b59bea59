"""Rewrite tests/durations.json (each module's seconds in a full run, which conftest.py uses
to start the longest modules first) from a run's JUnit XML:

    .venv/bin/python -m pytest -q -n 2 --dist loadscope --junitxml=/tmp/run.xml
    .venv/bin/python tests/update_durations.py /tmp/run.xml
"""

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

seconds: collections.Counter[str] = collections.Counter()
for case in ET.parse(sys.argv[1]).iter("testcase"):
    seconds[case.get("classname", "").replace(".", "/") + ".py"] += float(case.get("time", 0))
Path(__file__).with_name("durations.json").write_text(
    json.dumps({m: round(s, 1) for m, s in seconds.most_common()}, indent=0) + "\n")
