"""The design's `resources:` block: per-trial cpus, gpus, memory and time, validated."""

from __future__ import annotations

from pathlib import Path

import pytest

from labcoat.errors import LabcoatError
from labcoat.spec import Resources, load_design

DESIGN = """\
name: demo
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "{python} train.py --seed {seed}"
arms: {a: {control: true}, b: {params: {}}}
seeds: 2
resources:
  cpus: 2
  gpus: 0.5
  memory: %s
"""


@pytest.mark.parametrize("text, expected", [
    ("4GB", 4_000_000_000),          # SI: 4 * 10^9
    ("512MB", 512_000_000),
    ("2GiB", 2_147_483_648),         # binary: 2 * 1024^3
    ("1.5 gib", 1_610_612_736),
    ("100KiB", 102_400),
])
def test_memory_sizes_parse_to_bytes(text, expected):
    assert Resources(memory=text).memory_bytes == expected


def test_a_design_declares_resources(tmp_path: Path):
    path = tmp_path / "design.yaml"
    path.write_text(DESIGN % "3GiB")
    design = load_design(path)
    assert design.resources == Resources(cpus=2, gpus=0.5, memory="3GiB")
    assert design.resources.memory_bytes == 3 * 1024**3


@pytest.mark.parametrize("memory", ["4096", "lots", "4 XB", "-1GB"])
def test_memory_without_a_unit_is_one_error_at_its_line(tmp_path: Path, memory: str):
    path = tmp_path / "design.yaml"
    path.write_text(DESIGN % memory)
    with pytest.raises(LabcoatError) as caught:
        load_design(path)
    message = str(caught.value)
    assert f"{path}:9" in message  # the `memory:` line
    assert "unit" in message


def test_resources_refuse_nonsense():
    with pytest.raises(ValueError):
        Resources(cpus=0)
    with pytest.raises(ValueError):
        Resources(gpus=-1)
    with pytest.raises(ValueError):
        Resources(time_minutes=0)
    with pytest.raises(ValueError):
        Resources(disk="1GB")  # unknown keys are refused, not ignored


def test_a_design_without_resources_keeps_its_hash():
    """Hashes stored for experiments registered before `resources:` existed stay valid:
    this design hashed to this value before the section was added (labcoat at b4c19df)."""
    from labcoat.spec import design_hash, parse_design

    text = DESIGN.split("resources:")[0]
    design = parse_design(text)
    assert design_hash(design) == (
        "7732fcbbaeeee97597c8875e49bffb25d93bd00e3ec6cd83478a7e5f352bfd9d")
    assert design_hash(parse_design(DESIGN % "1GB")) != design_hash(design)
