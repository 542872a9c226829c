import os

from fairseq.file_io import PathManager

from fconv_plugin.compat.atomic_checkpoints import atomic_copy


def test_fairseq_checkpoint_copies_go_through_a_temporary_file(tmp_path, monkeypatch):
    source = tmp_path / "checkpoint_3_40.pt"
    source.write_bytes(os.urandom(100_000))
    target = tmp_path / "checkpoint_last.pt"
    target.write_bytes(b"the previous checkpoint")
    replaced = []
    real_replace = os.replace

    def watching_replace(src, dst):
        assert target.read_bytes() == b"the previous checkpoint"  # untouched until the rename
        replaced.append((os.path.dirname(src), dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watching_replace)
    assert PathManager.copy(str(source), str(target), overwrite=True)
    assert target.read_bytes() == source.read_bytes()
    assert replaced == [(str(tmp_path), str(target))]


def test_leftovers_of_a_killed_copy_are_removed_by_the_next_copy(tmp_path):
    source = tmp_path / "a.pt"
    source.write_bytes(b"x" * 10)
    leftover = tmp_path / "checkpoint_best.pt.abc123.tmp"
    leftover.write_bytes(b"half")
    atomic_copy(str(source), str(tmp_path / "checkpoint_best.pt"))
    assert not leftover.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "checkpoint_best.pt"]
