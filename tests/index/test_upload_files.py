"""A gallery's uploaded files: written whole before their record, kept when already
there, and cleared when no record names them."""

from __future__ import annotations

from groundsearch.index.store.upload_files import UploadFiles


def test_a_file_is_written_once_and_unnamed_ones_are_cleared(tmp_path):
    uploads = UploadFiles(tmp_path)
    name = uploads.name_for("ab" * 32, "jpg")
    assert name == f"uploads/{'ab' * 32}.jpg"
    uploads.clear(set)  # no folder yet: nothing to do, no lock file made
    assert list(tmp_path.iterdir()) == []
    with uploads.locked():
        uploads.write(name, b"photo")
        uploads.write(name, b"other bytes")  # the same name is the same content: kept
    assert (tmp_path / name).read_bytes() == b"photo"
    (tmp_path / "uploads" / "orphan.png").write_bytes(b"never recorded")
    uploads.clear(lambda: {name})
    assert sorted(p.name for p in (tmp_path / "uploads").iterdir()) == [f"{'ab' * 32}.jpg"]
    with uploads.locked(exclusive=True):
        uploads.delete(name)
        uploads.delete(name)  # already gone: no error
    assert list((tmp_path / "uploads").iterdir()) == []
