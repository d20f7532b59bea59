"""Sealed directories (labcoat.torch.seal_directory / verify_directory): the manifest the
integrations write over another library's checkpoint, checked against hashlib directly."""

import hashlib
import json

import pytest

pytest.importorskip("torch")

from labcoat.torch import (  # noqa: E402
    file_manifest,
    seal_directory,
    seal_file,
    verify_directory,
    verify_file,
)


def _checkpoint(path):
    (path / "sub").mkdir(parents=True)
    (path / "model.bin").write_bytes(bytes(range(256)) * 10)
    (path / "sub" / "state.json").write_text('{"step": 7}')
    (path / ".model.bin.tmp-1-ab").write_bytes(b"half a write")  # ignored: a temporary file
    return path


def test_the_manifest_lists_every_file_with_its_size_and_sha256(tmp_path):
    path = _checkpoint(tmp_path / "checkpoint-7")
    manifest = seal_directory(path, step=7, extra={"source": "test"})
    on_disk = json.loads((path / "labcoat-manifest.json").read_text())
    assert on_disk == manifest and on_disk["step"] == 7 and on_disk["source"] == "test"
    expected = {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for name, data in (("model.bin", (path / "model.bin").read_bytes()),
                                   ("sub/state.json", (path / "sub/state.json").read_bytes()))}
    assert on_disk["files"] == expected
    assert verify_directory(path) is None


def test_a_changed_truncated_missing_or_unsealed_checkpoint_does_not_verify(tmp_path):
    path = _checkpoint(tmp_path / "checkpoint-7")
    assert "no labcoat-manifest.json" in verify_directory(path)
    seal_directory(path, step=7)
    data = bytearray((path / "model.bin").read_bytes())
    data[100] ^= 1
    (path / "model.bin").write_bytes(bytes(data))
    assert "SHA-256" in verify_directory(path)
    (path / "model.bin").write_bytes(bytes(data[:50]))
    assert "has 50 bytes, the manifest says 2560" in verify_directory(path)
    (path / "model.bin").unlink()
    assert "model.bin is missing" in verify_directory(path)
    (path / "labcoat-manifest.json").write_text("{not json")
    assert "not valid JSON" in verify_directory(path)


def test_sealing_again_replaces_a_stale_manifest(tmp_path):
    path = _checkpoint(tmp_path / "checkpoint-7")
    seal_directory(path, step=7)
    (path / "model.bin").write_bytes(b"rewritten by a resumed run")
    assert verify_directory(path) is not None
    seal_directory(path, step=7)
    assert verify_directory(path) is None


def test_a_sealed_file_has_its_manifest_beside_it(tmp_path):
    file = tmp_path / "epoch=0-step=10.ckpt"
    file.write_bytes(b"weights" * 100)
    assert "no epoch=0-step=10.ckpt.labcoat-manifest.json" in verify_file(file)
    manifest = seal_file(file, step=10)
    assert file_manifest(file) == tmp_path / "epoch=0-step=10.ckpt.labcoat-manifest.json"
    assert manifest["files"] == {file.name: {
        "bytes": 700, "sha256": hashlib.sha256(b"weights" * 100).hexdigest()}}
    assert verify_file(file) is None
    file.write_bytes(b"weights" * 99)
    assert "has 693 bytes, the manifest says 700" in verify_file(file)
