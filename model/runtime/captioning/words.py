"""The decoder's words: caption tokens (lower-cased, split on spaces, punctuation stripped
or dropped), its vocabulary, and sentences written from tokens."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)

#: Function words a sentence may repeat ("a man in a red shirt sits in a chair").
STOPWORDS = frozenset(
    """a an the of in on at with and to is are while his her their its for by from into
    onto near under over through up down 's as it he she they them this that who out off
    around some be being has have""".split()  # noqa: SIM905 (a list literal: 50 lines)
)

_EDGE_PUNCT = re.compile(r"^[^\w']+|[^\w]+$")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens of a caption (punctuation dropped)."""
    tokens = (_EDGE_PUNCT.sub("", t) for t in text.lower().split())
    return [t for t in tokens if any(c.isalnum() for c in t)]


def sentence(tokens: Sequence[str]) -> str:
    """Tokens as a sentence: joined by spaces, first letter capitalised, a final period."""
    text = " ".join(tokens)
    return (text[:1].upper() + text[1:] + ".") if text else "."


@dataclass(frozen=True)
class DecoderVocab:
    """The decoder's words: four specials (``<pad>`` row 0), then words by frequency."""

    words: tuple[str, ...]
    #: The specials' rows.
    pad, unk, bos, eos = range(4)

    def __post_init__(self) -> None:
        if self.words[: len(SPECIALS)] != SPECIALS:
            raise ValueError(f"a decoder vocabulary starts with {SPECIALS}")

    @cached_property
    def _index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, captions: Iterable[str], min_count: int = 5) -> DecoderVocab:
        """Words seen at least ``min_count`` times, by frequency then spelling."""
        counts = Counter(t for c in captions for t in tokenize(c))
        kept = sorted(
            (w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w)
        )
        return cls((*SPECIALS, *kept))

    def __len__(self) -> int:
        return len(self.words)

    def index(self, word: str) -> int:
        return self._index.get(word, self.unk)

    def encode(self, text: str) -> list[int]:
        """``<bos>``, the caption's word ids, ``<eos>``."""
        return [self.bos, *(self.index(t) for t in tokenize(text)), self.eos]

    def decode(self, ids: Sequence[int]) -> str:
        """The sentence of word ids (specials left out)."""
        return sentence([self.words[i] for i in ids if i >= len(SPECIALS)])

    def stopword_mask(self) -> list[bool]:
        """For each row, whether it may repeat freely (a function word)."""
        return [w in STOPWORDS for w in self.words]
