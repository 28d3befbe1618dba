"""Concepts held out of training, and which captions mention them.

The held-out-concept protocol (docs/RESULTS.md, "Concepts Flickr8k never showed") trains
with every photo whose captions mention any of ``HELD_OUT`` removed, then asks the model
for those concepts on the test photos. A caption *mentions* a concept when one of its
lower-cased words is one of the concept's forms (whole words, no stemming beyond the
listed forms).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from groundsearch.model.data.flickr import CaptionedImages, DatasetError

#: Ten concepts ImageNet's classes cover (tabby, sorrel, ox, jay, acoustic guitar,
#: mountain bike, canoe, sports car, moped, ski…) and Flickr8k shows rarely or often:
#: each name with the word forms that count as a mention.
HELD_OUT: dict[str, tuple[str, ...]] = {
    "cat": ("cat", "cats", "kitten", "kittens", "kitty"),
    "horse": ("horse", "horses", "pony", "ponies"),
    "cow": ("cow", "cows", "cattle", "bull", "bulls", "calf", "ox"),
    "bird": (
        "bird",
        "birds",
        "seagull",
        "seagulls",
        "duck",
        "ducks",
        "goose",
        "geese",
        "pigeon",
        "pigeons",
        "swan",
        "swans",
    ),
    "guitar": ("guitar", "guitars", "guitarist"),
    "bicycle": ("bicycle", "bicycles", "bike", "bikes", "cyclist", "cyclists", "bmx"),
    "boat": ("boat", "boats", "canoe", "canoes", "kayak", "kayaks", "sailboat", "raft"),
    "car": ("car", "cars"),
    "motorcycle": ("motorcycle", "motorcycles", "motorbike", "motorbikes"),
    "snow": ("snow", "snowy", "snowboard", "snowboarder", "snowboarding", "snowman"),
}

_WORD = re.compile(r"[a-z]+")


def words_of(text: str) -> set[str]:
    """The lower-cased alphabetic words of a caption."""
    return set(_WORD.findall(text.lower()))


def resolve(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The forms of each named concept: a ``HELD_OUT`` name, or any other word (its
    only form is itself). DatasetError for an empty list or a non-word."""
    out: dict[str, tuple[str, ...]] = {}
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue
        if not _WORD.fullmatch(name):
            raise DatasetError(f"a concept is one word of letters, got {raw!r}")
        out[name] = HELD_OUT.get(name, (name,))
    if not out:
        raise DatasetError("no concept named")
    return out


def mentions(text: str, forms: Collection[str]) -> bool:
    """Whether caption ``text`` uses one of the word ``forms``."""
    return not words_of(text).isdisjoint(forms)


def photos_mentioning(ds: CaptionedImages, *groups: Collection[str]) -> set[int]:
    """Photos with a caption that mentions every group (one form of each)."""
    hits: set[int] = set()
    for text, image in zip(ds.captions, ds.caption_image, strict=True):
        words = words_of(text)
        if all(not words.isdisjoint(g) for g in groups):
            hits.add(image)
    return hits


def without_concepts(
    ds: CaptionedImages, concepts: Mapping[str, Collection[str]]
) -> CaptionedImages:
    """``ds`` less every photo whose captions mention any of ``concepts``."""
    forms = {f for fs in concepts.values() for f in fs}
    drop = photos_mentioning(ds, forms)
    keep = [i for i in range(len(ds.images)) if i not in drop]
    if not keep:
        raise DatasetError("holding these concepts out leaves no training photo")
    new_index = {old: new for new, old in enumerate(keep)}
    pairs = [
        (text, new_index[image])
        for text, image in zip(ds.captions, ds.caption_image, strict=True)
        if image in new_index
    ]
    return CaptionedImages(
        ds.root,
        tuple(ds.images[i] for i in keep),
        tuple(t for t, _ in pairs),
        tuple(i for _, i in pairs),
    )
