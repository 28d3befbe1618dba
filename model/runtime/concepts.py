"""The open-vocabulary channel: ImageNet's classes and GloVe beside the joint space.

A word the training captions never use ("zebra") has no trained meaning in the joint
space, but the backbone knows ImageNet's classes and GloVe their names; ConSE (Norouzi
et al. 2014) joins the two without training:

    c(z) = Σ_{k ∈ top T} p_k(z) · e_k / Σ p_k     (p: the backbone's own classifier;
                                                    e_k: GloVe of class k's name)
    g(s) = mean over the sentence's nouns n of a_n · GloVe(n)   (untuned, all 400k words)

with ``a_n = 1`` for a noun seen fewer than ``rare`` times in training, else
``familiar``. The score ``(1 − ρ(s)) · joint + weight · c(z)·g(s)`` (ρ = mean a_n) is
one inner product: the channel vectors, scaled, are appended to the joint embeddings.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from groundsearch.model.runtime.parsing.tree import DependencyTree

if TYPE_CHECKING:
    from groundsearch.model.runtime.images.backbones import ImageNetHead
    from groundsearch.model.runtime.tagger import WordTagger

#: Tags whose words name things: the words matched against ImageNet's classes.
NOUNS = frozenset({"NOUN", "PROPN"})
#: Tags of words that carry no content (used when a text has no noun at all).
FUNCTION_TAGS = frozenset(
    {"DET", "ADP", "PRON", "AUX", "CCONJ", "SCONJ", "PART", "PUNCT", "SYM", "NUM"}
)
DIM = 50  # GloVe 6B 50-d
#: How the photo side may call a class (``ConceptConfig.names``).
CLASS_NAMES = ("imagenet", "entry", "both")


@dataclass(frozen=True)
class ConceptConfig:
    """How much the channel counts (0: off) and how many classes describe a photo."""

    weight: float = 0.0
    top: int = 10
    #: a_n of a noun the joint model trained on (1 for the others)
    familiar: float = 0.0
    #: nouns seen fewer times than this in training count as untrained (chosen on dev)
    rare: int = 2
    #: > 0: a noun seen n times counts a_n = familiar + (1 − familiar) / (1 + (n /
    #: halfway)²) instead of the step rule
    halfway: float = 0.0
    #: what a class is called on the photo side: ``imagenet`` ("tabby, tabby cat"),
    #: ``entry`` (the everyday word, "cat": entry_level.tsv) or ``both`` (averaged)
    names: str = "imagenet"
    #: the word tagger's share of the photo side (``model.runtime.tagger``):
    #: c(z) = (1 − tagger) · the classes' part + tagger · the tagged words' part
    tagger: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.familiar <= 1.0:
            raise ValueError(f"the familiar-word share must be in [0, 1], got {self.familiar}")
        if self.rare < 0:
            raise ValueError(f"rare must be at least 0, got {self.rare}")
        if not 0.0 <= self.weight <= 10.0:
            raise ValueError(f"the concept weight must be in [0, 10], got {self.weight}")
        if not 1 <= self.top <= 1000:
            raise ValueError(f"the concept top-k must be in 1..1000, got {self.top}")
        if not 0.0 <= self.halfway <= 1e6:
            raise ValueError(f"halfway must be a count of at least 0, got {self.halfway}")
        if not 0.0 <= self.tagger <= 1.0:
            raise ValueError(f"the tagger's share must be in [0, 1], got {self.tagger}")
        if self.names not in CLASS_NAMES:
            raise ValueError(f"names must be one of {CLASS_NAMES}, got {self.names!r}")


def imagenet_classes() -> list[str]:
    """ImageNet-1k class names in the classifier's order (torchvision's metadata)."""
    from groundsearch.model.runtime.images.torchvision_guard import import_torchvision

    tv = import_torchvision()
    return list(tv.models.EfficientNet_B0_Weights.IMAGENET1K_V1.meta["categories"])


@lru_cache(maxsize=1)
def glove_table() -> tuple[dict[str, int], np.ndarray]:
    """Every GloVe word's row and the unit-length vectors (loaded once per process)."""
    from groundsearch.model.runtime.text.glove import load_glove

    words, vectors = load_glove()
    vectors = np.asarray(vectors, np.float32)  # normalised in place: 80 MB once, not thrice
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, np.maximum(norms, 1e-8), out=vectors)
    return dict(zip(words, range(len(words)), strict=True)), unit


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x / np.maximum(n, 1e-8), 0.0).astype(np.float32)


def phrase_vector(words: Sequence[str]) -> np.ndarray:
    """The unit mean of the GloVe vectors of ``words`` (zero if GloVe knows none)."""
    index, unit = glove_table()
    rows = [index[w] for w in (w.lower() for w in words) if w in index]
    return _unit(unit[rows].mean(axis=0)) if rows else np.zeros(DIM, np.float32)


def class_words(name: str) -> list[str]:
    """The words of a class name: "German shepherd" → ["german", "shepherd"]."""
    return [w for w in re.split(r"[\s\-'’/,]+", name.lower()) if w]


def content_words(tree: DependencyTree) -> list[str]:
    """The words of a text matched against class names: its nouns, else its content words."""
    nouns = [n for n in tree if n.upos in NOUNS]
    chosen = nouns or [n for n in tree if n.upos not in FUNCTION_TAGS]
    index = glove_table()[0]
    pairs = ((n.text.lower(), n.lemma.lower()) for n in chosen)
    return [text if text in index or lemma not in index else lemma for text, lemma in pairs]


def class_vectors(classes: Sequence[str], names: str = "imagenet") -> np.ndarray:
    """Each class's unit GloVe vector, by the name ``names`` says (``ConceptConfig``)."""
    own = np.stack([phrase_vector(class_words(c)) for c in classes])
    if names == "imagenet":
        return own
    from groundsearch.model.runtime.captioning.entry_level import EntryLevel

    table = EntryLevel.load()
    if list(table.classes) != list(classes):
        raise RuntimeError("the entry-level table's classes are not the classifier's")
    entry = np.stack([phrase_vector([w]) if w else own[i] for i, w in enumerate(table.words)])
    return entry if names == "entry" else _unit(entry + own)


def top_k(p: np.ndarray, k: int) -> np.ndarray:
    """``p`` with all but each row's ``k`` largest set to 0."""
    if k >= p.shape[1]:
        return p
    top = np.argpartition(-p, k - 1, axis=1)[:, :k]
    mask = np.zeros_like(p)
    np.put_along_axis(mask, top, 1.0, axis=1)
    return p * mask


class ConceptChannel:
    """ConSE vectors of photos (``backbone``'s pooled features through its classifier)
    and of texts; ``trained_words``: the joint model's training word counts."""

    def __init__(
        self,
        backbone: str,
        config: ConceptConfig,
        trained_words: Mapping[str, int] | Collection[str] | None = None,
    ) -> None:
        self.backbone, self.config = backbone, config
        counts = trained_words or {}
        as_counts = counts if isinstance(counts, Mapping) else dict.fromkeys(counts, config.rare)
        self.trained: Mapping[str, int] = as_counts

    @cached_property
    def _head(self) -> ImageNetHead:
        from groundsearch.model.runtime.images.backbones import imagenet_head

        return imagenet_head(self.backbone)

    @cached_property
    def classes(self) -> list[str]:
        """ImageNet's class names, in the classifier's order."""
        classes = imagenet_classes()
        if len(classes) != self._head.classes:
            raise RuntimeError(
                f"{self.backbone} has {self._head.classes} classes, the names {len(classes)}"
            )
        return classes

    @cached_property
    def class_vectors(self) -> np.ndarray:
        """Each class's unit GloVe vector, by the name ``config.names`` says."""
        return class_vectors(self.classes, self.config.names)

    @cached_property
    def class_mean(self) -> np.ndarray:
        """What every photo's ConSE vector shares (over distinct names), subtracted so
        that a word close to "things" in general gains no photo."""
        distinct = self.class_vectors
        distinct = distinct if self.config.names == "imagenet" else np.unique(distinct, axis=0)
        return np.asarray(distinct.mean(axis=0))

    @property
    def scale(self) -> float:
        """What each side is multiplied by, so that the inner product adds weight·cos."""
        return float(np.sqrt(self.config.weight))

    def class_probabilities(self, features: np.ndarray) -> np.ndarray:
        """The backbone's ImageNet softmax for pooled (un-normalised) features."""
        return self._head.probabilities(features)

    @cached_property
    def tagger(self) -> WordTagger:
        """The shipped word tagger (read only when ``config.tagger`` > 0)."""
        from groundsearch.model.runtime.tagger import WordTagger

        return WordTagger.load(backbone=self.backbone)

    @cached_property
    def tag_vectors(self) -> np.ndarray:
        """Each tagged word's unit GloVe vector (its written form, else its lemma)."""
        index, pairs = glove_table()[0], zip(self.tagger.words, self.tagger.lemmas, strict=True)
        return np.stack([phrase_vector([w if w in index else lemma]) for w, lemma in pairs])

    @cached_property
    def tag_mask(self) -> np.ndarray:
        """1 for the tagged words no ImageNet class is called by (snow, beach, man)."""
        from groundsearch.model.runtime.captioning.entry_level import EntryLevel

        named = set(EntryLevel.load().vocabulary)
        pairs = zip(self.tagger.words, self.tagger.lemmas, strict=True)
        return np.array([not ({w, lemma} & named) for w, lemma in pairs], np.float32)

    @cached_property
    def tag_mean(self) -> np.ndarray:
        """The tagged words' mean vector."""
        return np.asarray(self.tag_vectors.mean(axis=0))

    def image_vectors(self, features: np.ndarray) -> np.ndarray:
        """Unit ConSE vectors: the top-k classes' name vectors (and tagged words') weighted."""
        k = self.config.top
        out = _unit(top_k(self.class_probabilities(features), k) @ self.class_vectors)
        out = out - self.class_mean
        if self.config.tagger > 0:
            t = top_k(self.tagger.probabilities(features) * self.tag_mask, k)
            tags = _unit(t @ self.tag_vectors) - self.tag_mean
            out = (1.0 - self.config.tagger) * out + self.config.tagger * tags
        return out.astype(np.float32)

    def novelty(self, word: str) -> float:
        """a_n: 1 for a word the joint model never trained, else ``familiar`` (or fading
        with its training count, ``halfway``)."""
        seen = self.trained.get(word.lower(), 0)
        c = self.config
        if c.halfway > 0:
            return c.familiar + (1.0 - c.familiar) / (1.0 + (seen / c.halfway) ** 2)
        return 1.0 if seen < max(c.rare, 1) else c.familiar

    def sentence_vectors(self, trees: Sequence[DependencyTree]) -> np.ndarray:
        """g(s) of each text (``sentence_parts``)."""
        return self.sentence_parts(trees)[0]

    def sentence_parts(self, trees: Sequence[DependencyTree]) -> tuple[np.ndarray, np.ndarray]:
        """g(s) of each text (its content words' GloVe vectors weighted by a_n, averaged)
        and its novelty share ρ(s) (their mean a_n)."""
        index, unit = glove_table()
        out = np.zeros((len(trees), DIM), np.float32)
        share = np.zeros(len(trees), np.float32)
        for i, tree in enumerate(trees):
            words = [w for w in content_words(tree) if w in index]
            if words:
                a = np.array([self.novelty(w) for w in words], np.float32)
                out[i] = (a[:, None] * unit[[index[w] for w in words]]).mean(axis=0)
                share[i] = a.mean()
        return out, share

    def knows(self, word: str) -> bool:
        """Whether GloVe has ``word`` (so that the channel can match it)."""
        return word.lower() in glove_table()[0]
