"""Everyday words: the objects of the photos users keep, asked against a split.

COCO's 80 object categories as everyday words ("hydrant", "teddy"), with the
open-vocabulary check's (``CONCEPT_WORDS``). A word is *absent* from a split when no
caption uses it, *present* when captions of at least ``PRESENT`` photos do.
"""

from __future__ import annotations

from groundsearch.model.data.flickr import CaptionedImages
from groundsearch.model.data.held_out_concepts import photos_mentioning
from groundsearch.model.training.evaluation.held_out import CONCEPT_WORDS, ConceptQuery

#: COCO's 80 categories, each as the one word people say for it.
COCO_WORDS = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "hydrant", "meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow", "elephant",
    "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase",
    "frisbee", "skis", "snowboard", "ball", "kite", "bat", "glove", "skateboard",
    "surfboard", "racket", "bottle", "glass", "cup", "fork", "knife", "spoon", "bowl",
    "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hotdog", "pizza",
    "donut", "cake", "chair", "couch", "plant", "bed", "table", "toilet", "television",
    "laptop", "mouse", "remote", "keyboard", "phone", "microwave", "oven", "toaster", "sink",
    "refrigerator", "book", "clock", "vase", "scissors", "teddy", "hairdryer", "toothbrush",
    "light", "sign",
)  # fmt: skip
#: The words captions name an everyday thing by besides its own: synonyms and kinds ("a
#: man" is a person, "a puppy" a dog), after the synonym lists of COCO's categories in
#: Rohrbach et al. 2018 (CHAIR), for the words the protocols ask.
KINDS: dict[str, tuple[str, ...]] = {
    "person": ("people", "man", "men", "woman", "women", "boy", "girl", "child", "children",
               "kid", "baby", "lady", "guy", "toddler", "teenager", "adult", "player",
               "skier", "snowboarder", "skateboarder", "surfer", "biker", "cyclist",
               "bicyclist", "rider", "climber", "swimmer", "runner", "dancer", "worker"),
    "bicycle": ("bike",),
    "motorcycle": ("motorbike", "moped"),
    "car": ("automobile", "taxi", "cab", "jeep", "sedan", "suv"),
    "airplane": ("plane", "jet", "aircraft", "airliner"),
    "train": ("locomotive",),
    "boat": ("ship", "canoe", "kayak", "sailboat", "yacht", "raft", "ferry"),
    "bird": ("seagull", "gull", "duck", "pigeon", "parrot", "goose", "swan", "eagle", "owl",
             "pelican", "heron", "crow", "hawk", "flamingo"),
    "cat": ("kitten", "kitty"),
    "dog": ("puppy", "pup", "poodle", "terrier", "retriever", "labrador", "collie",
            "dachshund", "bulldog", "beagle", "husky", "greyhound", "chihuahua", "pug",
            "spaniel", "doberman", "rottweiler", "dalmatian", "hound"),
    "horse": ("pony", "foal", "stallion", "mare"),
    "sheep": ("lamb",),
    "cow": ("cattle", "calf", "bull", "ox"),
    "backpack": ("knapsack", "rucksack"),
    "umbrella": ("parasol",),
    "handbag": ("purse",),
    "tie": ("necktie",),
    "suitcase": ("luggage",),
    "cup": ("mug",),
    "phone": ("cellphone", "telephone", "smartphone"),
    "television": ("tv",),
    "couch": ("sofa",),
    "sign": ("billboard",),
    "donut": ("doughnut",),
    "refrigerator": ("fridge",),
}  # fmt: skip
#: Words asked bare (a mass noun or a scene), not "a WORD".
BARE = frozenset({"snow", "grass", "coffee", "paper", "bricks", "stones", "coins", "skis"})
#: The fewest photos whose captions use a word for it to count as present.
PRESENT = 3


def forms(word: str) -> tuple[str, ...]:
    """The forms of ``word`` a caption mentions it by."""
    return (word, word + "s", word + "es")


def names(word: str) -> tuple[str, ...]:
    """``word`` and the words captions name its kinds by (``KINDS``)."""
    return (word, *KINDS.get(word, ()))


def article(word: str) -> str:
    """The indefinite article people write before ``word`` ("an apple")."""
    return "an" if word[0] in "aeiou" else "a"


def everyday_queries() -> list[ConceptQuery]:
    """Every everyday word as its query ("a cup", "an apple"; the ``BARE`` ones alone), sorted."""
    words = sorted(set(COCO_WORDS) | set(CONCEPT_WORDS))
    return [ConceptQuery(w if w in BARE else f"{article(w)} {w}", w, (forms(w),)) for w in words]


def present_queries(ds: CaptionedImages) -> list[ConceptQuery]:
    """The everyday words present in ``ds``: captions of ``PRESENT`` photos or more use one."""
    return [q for q in everyday_queries() if len(photos_mentioning(ds, *q.groups)) >= PRESENT]
