"""Concepts held out of training (the held-out-concept protocol), and which captions
mention them: use one of a concept's forms as a lower-cased word."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from groundsearch.model.data.flickr import CaptionedImages, DatasetError


def _forms(words: str) -> tuple[str, ...]:
    return tuple(words.split())


#: Ten concepts ImageNet's classes cover (tabby, sorrel, ox, jay, acoustic guitar,
#: mountain bike, canoe, sports car, moped, ski…) and Flickr8k shows rarely or often:
#: each name with the word forms that count as a mention.
HELD_OUT: dict[str, tuple[str, ...]] = {
    "cat": _forms("cat cats kitten kittens kitty"),
    "horse": _forms("horse horses pony ponies"),
    "cow": _forms("cow cows cattle bull bulls calf ox"),
    "bird": _forms("bird birds seagull seagulls duck ducks goose geese pigeon pigeons swan swans"),
    "guitar": _forms("guitar guitars guitarist"),
    "bicycle": _forms("bicycle bicycles bike bikes cyclist cyclists bmx"),
    "boat": _forms("boat boats canoe canoes kayak kayaks sailboat raft"),
    "car": _forms("car cars"),
    "motorcycle": _forms("motorcycle motorcycles motorbike motorbikes"),
    "snow": _forms("snow snowy snowboard snowboarder snowboarding snowman"),
}

#: Words that name a *kind* of a held-out concept, or misspell it ("jeep" is a car,
#: "motorcyle"): the relevance protocol counts them as showing the concept (the training
#: sets and the P@5 and F1 protocols keep ``HELD_OUT`` alone). Left out on purpose: words
#: with a common other sense ("calves", "steer", "crane") and neighbours that are not
#: kinds ("donkey", "truck", "biker").
HYPONYMS: dict[str, tuple[str, ...]] = {
    "cat": (),
    "horse": _forms("horseback stallion mare foal colt"),
    "cow": _forms("oxen longhorn longhorns"),
    "bird": _forms(
        "gull gulls pelican pelicans eagle eagles hawk hawks owl owls heron herons egret "
        "egrets crow crows parrot parrots flamingo flamingos penguin penguins ostrich "
        "peacock peacocks sparrow sparrows vulture vultures falcon chicken chickens hen "
        "hens rooster duckling ducklings"
    ),
    "guitar": _forms("guitarists"),
    "bicycle": _forms("bicyclist bicyclists biking cycling bicycling"),
    "boat": _forms(
        "ship ships rowboat rowboats sailboats kayaker kayakers kayaking canoeing "
        "canoeist rafting rafts yacht yachts ferry gondola speedboat tugboat watercraft"
    ),
    "car": _forms(
        "jeep jeeps suv taxi taxis automobile automobiles sedan racecar racecars "
        "convertible minivan limo limousine"
    ),
    "motorcycle": _forms(
        "motorcyle motorcyles motorcyclist motorcyclists motocross dirtbike dirtbikes moped mopeds"
    ),
    "snow": _forms(
        "snowboarders snowmobile snowball snowballs snowsuit snowbank snowfall snowstorm "
        "snowshoe snowshoes snowmen"
    ),
}


def with_kinds(concepts: Mapping[str, Collection[str]]) -> dict[str, tuple[str, ...]]:
    """Each concept's forms followed by its ``HYPONYMS`` (none for a concept without)."""
    return {
        name: tuple(forms) + tuple(k for k in HYPONYMS.get(name, ()) if k not in forms)
        for name, forms in concepts.items()
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
    return ds.subset(keep)
