"""Sentences that name what the CNN sees: the classifier's everyday words
(``entry_level``) and the tagger's nouns constrain the decoder's beam search (Anderson et
al. 2017); a word it never learned borrows its nearest trained word's weights (DCC)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from groundsearch.model.runtime.captioning.beam import Constraints
from groundsearch.model.runtime.captioning.decoder import CaptionDecoder
from groundsearch.model.runtime.captioning.entry_level import EntryLevel
from groundsearch.model.runtime.captioning.words import STOPWORDS
from groundsearch.model.runtime.images.backbones import ImageNetHead
from groundsearch.model.runtime.tagger import WordTagger

#: A word the decoder never learned is a constraint when the classes it names add up to
#: this probability (chosen on Flickr8k dev; docs/RESULTS.md).
THRESHOLD = 0.15
#: A word the decoder learned is one from this probability only (chosen on dev).
LEARNED_THRESHOLD = 0.8
#: At most this many confident words per photo (the sentence must contain one of them).
COUNT = 3
#: A word the decoder never learned is a constraint when the word tagger gives it this
#: probability (chosen on Flickr8k dev; docs/RESULTS.md).
TAGGER_THRESHOLD = 0.1
#: Of the words only the tagger speaks for, at most this many per photo (its nouns
#: include people and parts, "biker", that the decoder took over the thing, "bike").
TAGGER_COUNT = 1
#: Learned words among the decoder's this many most frequent are always left to it.
KNOWN = 0
#: Entry-level words Flickr8k's captions mostly use in another sense ("people watch", "an
#: orange shirt"): never constraints for a decoder that knows them, never lenders.
AMBIGUOUS = frozenset(
    {
        "bow", "box", "can", "dock", "drink", "duck", "fan", "fly", "light", "monitor",
        "orange", "seal", "shop", "sign", "ski", "stage", "store", "swing", "tank", "watch",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """One class the classifier saw: its word (``""``: never named), ImageNet name and
    index, probability, and the word's (its classes' sum)."""

    word: str
    imagenet_class: str
    index: int
    probability: float
    word_probability: float


class NovelWords:
    """The classifier's (``head``, named by ``table``) and the ``tagger``'s confident
    words, as constraints for ``decoder`` (None: only ``seen``)."""

    def __init__(
        self,
        head: ImageNetHead,
        table: EntryLevel,
        decoder: CaptionDecoder | None,
        threshold: float = THRESHOLD,
        count: int = COUNT,
        known: int = KNOWN,
        learned_threshold: float = LEARNED_THRESHOLD,
        tagger: WordTagger | None = None,
        tagger_threshold: float = TAGGER_THRESHOLD,
    ) -> None:
        if head.classes != len(table):
            raise ValueError(f"the classifier has {head.classes} classes, the table {len(table)}")
        if not 0.0 < threshold <= 1.0 or count < 0:
            raise ValueError(f"threshold must be in (0, 1] and count ≥ 0, got {threshold}, {count}")
        if not 0.0 < tagger_threshold <= 1.0:
            raise ValueError(f"the tagger's threshold must be in (0, 1], got {tagger_threshold}")
        self.head, self.table = head, table
        self.threshold, self.count, self.known = threshold, count, known
        self.learned_threshold = learned_threshold
        self.tagger, self.tagger_threshold = tagger, tagger_threshold
        self.words = table.vocabulary
        self.tagged: tuple[str, ...] = ()
        if tagger is not None and decoder is not None:
            self.tagged = tagger_words(tagger, decoder)
            self.words = self.words + [w for w in self.tagged if w not in set(self.words)]
        column = {w: j for j, w in enumerate(self.words)}
        self.to_word = np.zeros((len(table), len(self.words)), np.float32)
        own = {w: j for j, w in enumerate(tagger.words)} if tagger is not None else {}
        self.tag_columns = [own[w] for w in self.tagged]
        self.tag_targets = [column[w] for w in self.tagged]
        for i, w in enumerate(table.words):
            if w:
                self.to_word[i, column[w]] = 1.0
        self.decoder = decoder
        self.borrowed: tuple[str, ...] = ()
        self.sources: tuple[int, ...] = ()
        self.ids: dict[str, int] = {}
        if decoder is not None:
            vocab = decoder.vocab
            self.borrowed = tuple(w for w in self.words if vocab.index(w) == vocab.unk)
            self.sources = tuple(borrow_sources(decoder, self.borrowed, self.words))
            self.ids = {w: vocab.index(w) for w in self.words if vocab.index(w) != vocab.unk}
            self.ids.update({w: len(vocab) + j for j, w in enumerate(self.borrowed)})

    @classmethod
    def for_decoder(
        cls,
        decoder: CaptionDecoder | None,
        backbone: str,
        table: EntryLevel | None = None,
        **options: Any,
    ) -> NovelWords:
        """The words of ``backbone``'s own classifier for ``decoder`` (``options``: the
        keyword arguments of ``NovelWords``)."""
        from groundsearch.model.runtime.images.backbones import imagenet_head

        return cls(imagenet_head(backbone), table or EntryLevel.load(), decoder, **options)

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """The classifier's softmax (n × 1000) for pooled (un-normalised) features."""
        return self.head.probabilities(features)

    def word_probabilities(self, p: np.ndarray) -> np.ndarray:
        """Each word's probability (n × words): the sum over the classes it names."""
        return p @ self.to_word

    def tag_probabilities(self, features: np.ndarray) -> np.ndarray:
        """The tagger's probability of each tagged word (n × words; 0 for the others)."""
        out = np.zeros((len(features), len(self.words)), np.float32)
        if self.tagger is not None and self.tagged:
            out[:, self.tag_targets] = self.tagger.probabilities(features, self.tag_columns)
        return out

    def seen(self, features: np.ndarray, floor: float = 0.05, top: int = 5) -> list[list[Seen]]:
        """For each photo, its ``top`` most probable classes at ``floor`` or more."""
        p = self.probabilities(features)
        pw = self.word_probabilities(p)
        column = {w: j for j, w in enumerate(self.words)}
        out: list[list[Seen]] = []
        for row, word_row in zip(p, pw, strict=True):
            out.append([])
            for i in (int(i) for i in np.argsort(-row, kind="stable")[:top] if row[i] >= floor):
                w = self.table.word(i)
                share = float(word_row[column[w]]) if w else 0.0
                out[-1].append(Seen(w, self.table.classes[i], i, float(row[i]), share))
        return out

    def speaks_for(self, word: str, probability: float, tagged: float = 0.0) -> bool:
        """Whether ``word`` seen with ``probability`` is a constraint: an unlearned word from
        ``threshold`` (``tagger_threshold``), a learned one from ``learned_threshold``
        unless among its ``known`` most frequent or ``AMBIGUOUS``."""
        if self.decoder is None or word not in self.ids:
            return False
        i = self.ids[word]
        if i >= len(self.decoder.vocab) and tagged >= self.tagger_threshold:
            return True
        if probability < self.threshold:
            return False
        if i >= len(self.decoder.vocab):
            return True
        return (
            probability >= self.learned_threshold and i >= self.known + 4 and word not in AMBIGUOUS
        )

    def confident(self, features: np.ndarray) -> list[list[str]]:
        """For each photo, the words (at most ``count``) spoken for, most probable first."""
        pw = self.word_probabilities(self.probabilities(features))
        return self.pick(pw, self.tag_probabilities(features))

    def pick(self, pw: np.ndarray, tw: np.ndarray) -> list[list[str]]:
        """``confident`` from the classifier's (``pw``) and tagger's (``tw``) word
        probabilities, at most ``TAGGER_COUNT`` spoken for by the tagger alone."""
        out = []
        for row, tags in zip(pw, tw, strict=True):
            words: list[str] = []
            tagged = 0
            for j in np.argsort(-np.maximum(row, tags), kind="stable"):
                w = self.words[j]
                if not self.speaks_for(w, row[j], tags[j]):
                    continue
                alone = not self.speaks_for(w, row[j])
                if alone and tagged >= TAGGER_COUNT:
                    continue
                tagged += alone
                words.append(w)
                if len(words) == self.count:
                    break
            out.append(words)
        return out

    def constraints(self, features: np.ndarray) -> Constraints:
        """The confident words of each photo as the decoder's constraints."""
        return self.as_constraints(self.confident(features))

    def as_constraints(self, words: list[list[str]]) -> Constraints:
        """Constraints of given words per row (each one of ``self.words``)."""
        if self.decoder is None:
            raise ValueError("constraints need the decoder they are for")
        return Constraints([[self.ids[w] for w in ws] for ws in words], self.borrowed, self.sources)


def tagger_words(tagger: WordTagger, decoder: CaptionDecoder) -> tuple[str, ...]:
    """The tagger's words ``decoder`` never learned and GloVe knows (so a trained noun
    can lend its weights), less ``AMBIGUOUS`` and stopwords."""
    from groundsearch.model.runtime.concepts import glove_table

    index, vocab, skip = glove_table()[0], decoder.vocab, AMBIGUOUS | STOPWORDS
    return tuple(
        w for w in tagger.words if vocab.index(w) == vocab.unk and w in index and w not in skip
    )


def borrow_sources(
    decoder: CaptionDecoder, words: tuple[str, ...], nouns: list[str] | None = None
) -> list[int]:
    """For each word the decoder never learned, the row of its nearest trained content
    word by GloVe cosine (DCC), among ``nouns`` less ``AMBIGUOUS`` when given."""
    from groundsearch.model.runtime.concepts import glove_table

    index, unit = glove_table()
    vocab = decoder.vocab
    allowed = set(nouns) - AMBIGUOUS if nouns is not None else None
    rows = [
        i
        for i, w in enumerate(vocab.words)
        if w.isalpha()
        and len(w) > 2
        and w not in STOPWORDS
        and w in index
        and (allowed is None or w in allowed)
    ]
    if not rows:
        raise ValueError("the decoder has no content word GloVe knows")
    trained = unit[[index[vocab.words[i]] for i in rows]]
    out = []
    for w in words:
        if w not in index:
            raise ValueError(f"GloVe does not know {w!r}")
        out.append(rows[int(np.argmax(trained @ unit[index[w]]))])
    return out
