"""What an indexing run records: files deduplicated by content, a changed file moving
to its new photo, files gone from disk forgotten with the photos they leave behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexing_runs import IndexedFile, IndexedFiles
from tests.index.synthetic import DIM, ID, indexed, search_images, vecs


@pytest.fixture
def gallery(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    yield g
    g.close()


def test_indexed_files_dedup_by_content_and_follow_changes(gallery):
    v = vecs(4)
    files = IndexedFiles(gallery)
    added = files.add_files([indexed(i, v[i], (f"cap {i}",)) for i in range(3)], run=1)
    assert (added.photos, added.files, added.captions) == (3, 3, 3)
    copy = IndexedFile("/elsewhere/copy.jpg", 10, 1000, "sha-0")  # same content as 0.jpg
    assert files.add_files([copy], run=1).photos == 0
    assert gallery.counts()["images"] == 3
    hits = search_images(gallery, v[0], 3)
    assert len({h.id for h in hits}) == 3  # never the same photo twice
    # 0.jpg's content changes: the photo moves to the copy's path, a new photo appears
    changed = IndexedFile("/photos/0.jpg", 99, 2000, "sha-new", v[3])
    assert files.add_files([changed], run=2).photos == 1
    first = gallery.image(hits[0].id if hits[0].record.path.endswith("0.jpg") else 1)
    assert first.path == "/elsewhere/copy.jpg"
    # run 3 sees only 1.jpg under /photos: 0.jpg and 2.jpg are gone from disk
    files.mark_seen(["/photos/1.jpg"], run=3)
    assert files.forget_unseen(["/photos"], run=3) == 2  # sha-new and 2.jpg's photo
    paths = sorted(h.record.path for h in search_images(gallery, v[0], 10))
    assert paths == ["/elsewhere/copy.jpg", "/photos/1.jpg"]
    assert gallery.counts() == {"images": 2, "captions": 2}


def test_a_file_with_new_content_replaces_its_photo_unless_a_copy_keeps_it(gallery):
    v = vecs(3)
    files = IndexedFiles(gallery)
    files.add_files([indexed(i, v[i]) for i in range(2)], run=1)
    files.add_files([IndexedFile("/elsewhere/copy.jpg", 10, 1000, "sha-0")], run=1)
    kept = files.add_files([IndexedFile("/photos/0.jpg", 99, 2000, "sha-new0", v[2])], run=2)
    assert (kept.photos, kept.replaced) == (1, 0)  # the copy still holds sha-0's photo
    edited = files.add_files([IndexedFile("/photos/1.jpg", 99, 2000, "sha-new1", v[2])], run=2)
    assert (edited.photos, edited.replaced) == (1, 1)
    assert gallery.counts()["images"] == 3  # sha-0 (the copy), sha-new0, sha-new1


def test_runs_are_numbered_and_a_new_photo_needs_its_vector(gallery):
    files = IndexedFiles(gallery)
    assert files.next_run() == 1 and not files.has_files_under(Path("/photos"))
    files.add_files([indexed(0, vecs(1)[0])], run=files.next_run())
    assert files.next_run() == 2 and files.has_files_under(Path("/photos"))
    assert not files.has_files_under(Path("/photo"))  # a folder, not a prefix of a name
    assert files.file_state("/photos/0.jpg") == (10, 1000, 1, "sha-0", False, False)  # not read
    assert files.photo_of_sha("sha-0") == 1 and files.photo_of_sha("sha-1") is None
    with pytest.raises(ValueError, match="a new photo needs its vector"):
        files.add_files([indexed(1, vecs(1)[0]), IndexedFile("/photos/x.jpg", 1, 1, "sha-x")])
    assert gallery.counts()["images"] == 1  # the bad batch wrote nothing
