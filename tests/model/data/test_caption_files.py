"""Captions files: TSV (Flickr8k's token file as is) and JSON Lines, problems, lookups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundsearch.model.data.caption_files import CaptionFileError, read_caption_file

TOKENS = Path("/work/shared/data/flickr8k/Flickr8k.token.txt")
IMAGES = TOKENS.parent / "Images"


def test_flickr8k_token_file_works_as_is():
    captions = read_caption_file(TOKENS)
    assert captions.problems == []
    assert len(captions) == 8092  # 8091 photos and one key that names none
    lines = TOKENS.read_text().splitlines()
    assert (
        40_000 < sum(map(len, captions.captions.values())) <= len(lines)
    )  # exact duplicates kept once
    photo = IMAGES / "1000268201_693b08cb0e.jpg"
    first = captions.for_photo(photo, [IMAGES])
    assert first[0] == "A child in a pink dress is climbing up a set of stairs in an entry way ."
    assert len(first) == 5
    assert "1000268201_693b08cb0e.jpg" not in captions.unused()
    assert "2258277193_586949ec62.jpg.1" in captions.unused()


def test_tsv_problems_are_collected_with_file_and_line(tmp_path):
    path = tmp_path / "captions.tsv"
    path.write_text(
        "a.jpg\tA dog runs .\n"
        "\n"
        "no tab here\n"
        "\tno photo\n"
        "b.jpg\t   \n"
        "./sub\\c.jpg\t  A cat sleeps .  \n"
        "a.jpg#3\tA dog runs .\n"
        "a.jpg\tA dog runs fast .\n",
        encoding="utf-8",
    )
    captions = read_caption_file(path)
    assert captions.captions == {
        "a.jpg": ["A dog runs .", "A dog runs fast ."],
        "sub/c.jpg": ["A cat sleeps ."],
    }
    assert captions.problems == [
        f"{path}:3: no tab between photo and caption",
        f"{path}:4: empty photo",
        f"{path}:5: empty caption",
    ]
    assert sum(map(len, captions.captions.values())) == 3


def test_jsonl_forms_and_problems(tmp_path):
    path = tmp_path / "captions.jsonl"
    lines = [
        {"photo": "a.jpg", "caption": " A dog runs . "},
        {"path": "b.jpg", "captions": ["One .", "Two .", "One ."]},
        {"file": "c.jpg", "caption": "File ."},
        {"image": "d.jpg", "caption": "Image ."},
        {"caption": "no photo"},
        {"photo": 3, "caption": "x"},
        {"photo": "e.jpg", "captions": "not a list"},
        {"photo": "e.jpg", "captions": [1]},
        {"photo": "e.jpg"},
        {"photo": "e.jpg", "caption": ""},
        ["a", "list"],
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n{broken\n"
    path.write_text(text, encoding="utf-8")
    captions = read_caption_file(path)
    assert captions.captions == {
        "a.jpg": ["A dog runs ."],
        "b.jpg": ["One .", "Two ."],
        "c.jpg": ["File ."],
        "d.jpg": ["Image ."],
    }
    assert [p.removeprefix(f"{path}:") for p in captions.problems] == [
        "5: no photo (one of photo, path, file, image)",
        '6: "photo" must be a non-empty string',
        '7: "captions" must be a list of strings',
        "8: captions must be strings",
        '9: no "caption" or "captions"',
        "10: empty caption",
        "11: not a JSON object",
        "12: not JSON (Expecting property name enclosed in double quotes)",
    ]
    # the extension picks the format: the same lines in a .json file
    copy = tmp_path / "captions.json"
    copy.write_text(text, encoding="utf-8")
    assert read_caption_file(copy).captions == captions.captions


def test_files_that_cannot_be_used_at_all(tmp_path):
    with pytest.raises(CaptionFileError, match=r"missing\.tsv: file not found"):
        read_caption_file(tmp_path / "missing.tsv")
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("a.jpg\tun café\n".encode("latin-1"))
    with pytest.raises(CaptionFileError, match=r"latin\.tsv: not UTF-8"):
        read_caption_file(latin)
    photo = tmp_path / "photo.tsv"
    photo.write_bytes((IMAGES / "1000268201_693b08cb0e.jpg").read_bytes())
    with pytest.raises(CaptionFileError, match=r"photo\.tsv: not UTF-8"):
        read_caption_file(photo)
    nul = tmp_path / "nul.tsv"
    nul.write_bytes(b"a.jpg\tabc\x00def\n")
    with pytest.raises(CaptionFileError, match="binary"):
        read_caption_file(nul)
    prose = tmp_path / "notes.txt"
    prose.write_text("These are my holiday photos.\nNo tabs anywhere.\n")
    with pytest.raises(CaptionFileError, match=r"notes.txt: no usable line .*notes.txt:1: no tab"):
        read_caption_file(prose)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps([{"photo": "a.jpg", "caption": "A ."}], indent=2))
    with pytest.raises(CaptionFileError, match="a JSON object per line"):
        read_caption_file(pretty)
    with pytest.raises(CaptionFileError, match="cannot be read"):
        read_caption_file(tmp_path)  # a folder
    assert issubclass(CaptionFileError, ValueError)
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n\n")
    assert len(read_caption_file(empty)) == 0


def test_lookup_order_absolute_then_relative_then_bare_name(tmp_path, monkeypatch):
    gallery = tmp_path / "pics"
    captions_path = tmp_path / "meta" / "captions.tsv"
    captions_path.parent.mkdir()
    absolute = gallery / "x" / "abs.jpg"
    captions_path.write_text(
        f"{absolute}\tBy absolute path .\n"
        "x/abs.jpg\tBy root-relative path .\n"
        "../pics/x/up.jpg\tBy bare name: .. is not followed .\n"
        "local.jpg\tBeside the captions file .\n"
        "2019/holiday.jpg\tBy a unique bare name .\n"
        "x/rel.jpg\tBy root-relative path .\n"
        "a/same.jpg\tFirst of two same-named keys .\n"
        "b/same.jpg\tSecond of two same-named keys .\n"
        "IMG_0001.jpg\tA camera name .\n"
    )
    captions = read_caption_file(captions_path)
    roots = [gallery]

    def lookup(path: Path) -> list[str]:
        return captions.for_photo(path, roots)

    assert lookup(absolute) == ["By absolute path ."]
    assert lookup(gallery / "x" / "rel.jpg") == ["By root-relative path ."]
    assert lookup(tmp_path / "meta" / "local.jpg") == ["Beside the captions file ."]
    assert lookup(gallery / "holiday.jpg") == ["By a unique bare name ."]
    assert lookup(gallery / "same.jpg") == []  # two keys share the name: no guess
    assert lookup(gallery / "c" / "IMG_0001.jpg") == ["A camera name ."]
    assert lookup(gallery / "c" / "IMG_0001.jpg") == ["A camera name ."]  # the same photo again
    assert lookup(gallery / "d" / "IMG_0001.jpg") == []  # another photo of that name
    assert captions.ambiguous == [gallery / "d" / "IMG_0001.jpg"]
    assert lookup(gallery / "x" / "up.jpg") == ["By bare name: .. is not followed ."]
    assert captions.unused() == [
        "x/abs.jpg",
        "a/same.jpg",
        "b/same.jpg",
    ]
    # a root given relative to the working folder
    monkeypatch.chdir(tmp_path)
    again = read_caption_file(Path("meta/captions.tsv"))
    assert again.path == captions_path
    assert again.for_photo(gallery / "x" / "abs.jpg", [Path("pics")]) == ["By absolute path ."]
    assert again.for_photo(gallery / "x" / "rel.jpg", [Path("pics")]) == ["By root-relative path ."]


def test_returned_captions_are_copies(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("a.jpg\tOne .\n")
    captions = read_caption_file(path)
    captions.for_photo(tmp_path / "a.jpg", []).append("changed")
    assert captions.for_photo(tmp_path / "a.jpg", []) == ["One ."]
