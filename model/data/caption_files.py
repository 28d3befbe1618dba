"""Captions for the photos being indexed, from a TSV (``photo<TAB>caption``, a Flickr8k
``#<n>`` dropped) or JSON Lines file (``{"photo": …, "caption": …}`` or ``"captions"``;
"path", "file", "image" also name the photo)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: Keys that name the photo in a JSON Lines object, in order of preference.
PHOTO_FIELDS = ("photo", "path", "file", "image")
_FLICKR_SUFFIX = re.compile(r"#\d+$")


class CaptionFileError(ValueError):
    """A captions file that cannot be used at all (missing, not UTF-8, no usable line)."""


class CaptionFile:
    """Photo key → captions, with the problems found while reading."""

    def __init__(self, path: Path, captions: dict[str, list[str]], problems: list[str]) -> None:
        self.path, self.captions, self.problems = path, captions, problems
        self._used: set[str] = set()
        self._by_name: dict[str, list[str]] = {}
        for key in captions:
            self._by_name.setdefault(key.rpartition("/")[2], []).append(key)
        self._name_claims: dict[str, Path] = {}
        self.ambiguous: list[Path] = []  # photos refused a bare-name match another took

    def __len__(self) -> int:
        return len(self.captions)

    def for_photo(self, photo: Path, roots: Sequence[Path]) -> list[str]:
        """Captions of an indexed photo (absolute path), by the first key naming it: the
        path, relative to this file's folder or a root, or its bare name when unique."""
        photo = Path(os.path.abspath(photo))
        for key in self._keys(photo, roots):
            if key in self.captions:
                self._used.add(key)
                return list(self.captions[key])
        keys = self._by_name.get(photo.name, [])
        if len(keys) != 1:
            return []
        claimed = self._name_claims.setdefault(keys[0], photo)
        if claimed != photo:
            self.ambiguous.append(photo)
            return []
        self._used.add(keys[0])
        return list(self.captions[keys[0]])

    def unused(self) -> list[str]:
        """Keys no photo has claimed, in file order."""
        return [key for key in self.captions if key not in self._used]

    def _keys(self, photo: Path, roots: Sequence[Path]) -> Iterator[str]:
        yield photo.as_posix()
        for folder in (self.path.parent, *(Path(os.path.abspath(r)) for r in roots)):
            if photo.is_relative_to(folder):
                yield photo.relative_to(folder).as_posix()


def read_caption_file(path: Path) -> CaptionFile:
    """Read a TSV or JSON Lines captions file (by extension: ``.jsonl``/``.json`` or not)."""
    path = Path(os.path.abspath(path))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise CaptionFileError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        message = f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise CaptionFileError(message) from None
    except OSError as exc:
        raise CaptionFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if "\x00" in text:
        raise CaptionFileError(f"{path}: a binary file, not captions")
    jsonl = path.suffix.lower() in (".jsonl", ".json")
    captions: dict[str, list[str]] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        pairs = (_json_line(line) if jsonl else _tsv_line(line)) if line.strip() else []
        if isinstance(pairs, str):
            problems.append(f"{path}:{number}: {pairs}")
            continue
        for photo, caption in pairs:
            if caption not in (have := captions.setdefault(photo, [])):
                have.append(caption)
    if problems and not captions:
        kind = "a JSON object per line" if jsonl else "photo<TAB>caption per line"
        first = problems[0]
        raise CaptionFileError(f"{path}: no usable line (expected {kind}); the first: {first}")
    return CaptionFile(path, captions, problems)


def _key(photo: str) -> str:
    key = photo.strip().replace("\\", "/")
    while key.startswith("./"):
        key = key[2:]
    return key


def _tsv_line(line: str) -> list[tuple[str, str]] | str:
    """The (photo, caption) of a TSV line, or why it is malformed."""
    photo, tab, caption = line.partition("\t")
    if not tab:
        return "no tab between photo and caption"
    key, caption = _key(_FLICKR_SUFFIX.sub("", photo.strip())), caption.strip()
    if not key:
        return "empty photo"
    if not caption:
        return "empty caption"
    return [(key, caption)]


def _json_line(line: str) -> list[tuple[str, str]] | str:
    """The (photo, caption) pairs of a JSON Lines line, or why it is malformed."""
    try:
        obj: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    if not isinstance(obj, dict):
        return "not a JSON object"
    field = next((f for f in PHOTO_FIELDS if f in obj), None)
    if field is None:
        return f"no photo (one of {', '.join(PHOTO_FIELDS)})"
    if not isinstance(obj[field], str) or not _key(obj[field]):
        return f'"{field}" must be a non-empty string'
    captions = [obj["caption"]] if "caption" in obj else []
    if "captions" in obj:
        if not isinstance(obj["captions"], list):
            return '"captions" must be a list of strings'
        captions += obj["captions"]
    if not captions:
        return 'no "caption" or "captions"'
    if not all(isinstance(c, str) for c in captions):
        return "captions must be strings"
    if not all(c.strip() for c in captions):
        return "empty caption"
    return [(_key(obj[field]), c.strip()) for c in captions]
