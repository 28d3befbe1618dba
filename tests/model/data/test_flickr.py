"""Reading Flickr8k-layout datasets: the real one and broken copies of it."""

from __future__ import annotations

import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.data import DatasetError, load_captioned_images

FLICKR = get_settings().data_dir / "flickr8k"


def test_official_test_split_has_1000_images_and_5000_captions():
    ds = load_captioned_images(FLICKR, split="test")
    assert len(ds.images) == 1000 and len(ds.captions) == 5000
    assert ds.caption_image[:6] == (0, 0, 0, 0, 0, 1)
    assert ds.image_path(0).is_file()
    assert len(ds.captions_of(0)) == 5


def test_bogus_id_without_image_is_skipped():
    ds = load_captioned_images(FLICKR)
    assert len(ds.images) == 8091
    assert not any(name.endswith(".1") for name in ds.images)


def small_copy(tmp_path, lines: list[str]):
    (tmp_path / "Images").mkdir()
    src = sorted((FLICKR / "Images").iterdir())[:2]
    for p in src:
        (tmp_path / "Images" / p.name).symlink_to(p)
    (tmp_path / "Flickr8k.token.txt").write_text("\n".join(lines) + "\n")
    return [p.name for p in src]


def test_custom_split_file(tmp_path):
    a, b = small_copy(tmp_path, [])
    (tmp_path / "Flickr8k.token.txt").write_text(f"{a}#0\tA dog.\n{b}#0\tA cat.\n{b}#1\tCat.\n")
    (tmp_path / "mine.txt").write_text(f"{b}\n")
    ds = load_captioned_images(tmp_path, split=tmp_path / "mine.txt")
    assert ds.images == (b,) and ds.captions == ("A cat.", "Cat.")


def test_malformed_line_is_named(tmp_path):
    small_copy(tmp_path, ["no tab or hash here"])
    with pytest.raises(DatasetError, match=r"Flickr8k.token.txt:1: expected"):
        load_captioned_images(tmp_path)


def test_empty_dataset_and_empty_split_are_errors(tmp_path):
    a, _ = small_copy(tmp_path, [])
    with pytest.raises(DatasetError, match="no image with captions"):
        load_captioned_images(tmp_path)
    (tmp_path / "Flickr8k.token.txt").write_text(f"{a}#0\tA dog.\n")
    (tmp_path / "none.txt").write_text("missing.jpg\n")
    with pytest.raises(DatasetError, match="no image with captions found in split"):
        load_captioned_images(tmp_path, split=tmp_path / "none.txt")


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(DatasetError, match="image folder not found"):
        load_captioned_images(tmp_path)
