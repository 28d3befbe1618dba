"""Exporting a gallery's vectors by photo file name (what the caption decoder trains on)."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.index.errors import IdentityMismatch, StoreError
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexing_runs import IndexedFile, IndexedFiles
from groundsearch.index.store.export import export_vectors

DIM, ID = 4, {"checkpoint_sha256": "test"}


def test_vectors_and_captions_come_out_by_file_name_and_subsets_name_missing_photos(tmp_path):
    rng = np.random.default_rng(0)
    v = rng.normal(size=(3, DIM)).astype(np.float32)
    cv = rng.normal(size=(4, DIM)).astype(np.float32)
    g = Gallery.create(tmp_path / "g", DIM, ID)
    IndexedFiles(g).add_files(
        [
            IndexedFile("/p/a.jpg", 1, 1, "sha-a", v[0], ("A dog .", "A black dog ."), cv[:2]),
            IndexedFile("/p/b.jpg", 1, 1, "sha-b", v[1], ("Two cats .",), cv[2:3]),
            IndexedFile("/p/c.jpg", 1, 1, "sha-c", v[2], ("A boat .",), cv[3:4]),
        ]
    )
    g.close()
    before = (tmp_path / "g" / "gallery.db").stat().st_mtime_ns
    out = export_vectors(tmp_path / "g", ID)
    assert (tmp_path / "g" / "gallery.db").stat().st_mtime_ns == before  # read only
    assert sorted(out.photo_names) == ["a.jpg", "b.jpg", "c.jpg"]
    part = out.subset(["c.jpg", "a.jpg"])
    assert part.photo_names == ("c.jpg", "a.jpg")
    np.testing.assert_array_equal(part.photo_vectors, v[[2, 0]])
    assert sorted(zip(part.caption_texts, part.caption_photo.tolist(), strict=True)) == [
        ("A black dog .", 1),
        ("A boat .", 0),
        ("A dog .", 1),
    ]
    row = part.caption_texts.index("A black dog .")
    np.testing.assert_array_equal(part.caption_vectors[row], cv[1])
    with pytest.raises(StoreError, match=r"1 of 2 photos are not in the gallery \(e.g. d.jpg\)"):
        out.subset(["a.jpg", "d.jpg"])
    with pytest.raises(IdentityMismatch):
        export_vectors(tmp_path / "g", {"checkpoint_sha256": "another"})
    with pytest.raises(StoreError, match="no gallery"):
        export_vectors(tmp_path / "nothing", ID)
