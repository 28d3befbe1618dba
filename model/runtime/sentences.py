"""The one way in for text: raw texts → cleaned once → parsed → the usable-text rule →
vectors, so a text is refused by one rule with one message: ``too-long``, ``no-words``,
``unparsable``, ``unknown-words``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from groundsearch.model.runtime.parsing.parser import MAX_TEXT_CHARS, ParseError, clean_text
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.text.vocab import NoKnownWordError

#: Why a text is unusable.
Reason = Literal["too-long", "no-words", "unparsable", "unknown-words"]
#: Texts (cleaned) → one tree per text, or for a text that fails, its ParseError in its
#: place; a callable may instead raise ParseError for the whole batch.
ParseFn = Callable[[Sequence[str]], Sequence[DependencyTree | BaseException]]


class SentenceModel(Protocol):
    """What the door needs of a model: its known-word rule and sentence vectors."""

    def require_known_words(self, trees: Sequence[DependencyTree], what: str) -> None: ...

    def embed_sentences(self, trees: Sequence[DependencyTree]) -> np.ndarray: ...


ADVICE = (
    "write a phrase or sentence in English with at least one common word, "
    "e.g. 'a dog runs on the beach'"
)


class UnusableText(ValueError):
    """A text that cannot become a vector: ``what`` names it (``"caption 2"``), ``reason``
    says why (``no-words`` and ``unknown-words`` share the message users read)."""

    def __init__(self, what: str, reason: Reason, detail: str = "") -> None:
        self.what, self.reason, self.detail = what, reason, detail
        if reason in ("no-words", "unknown-words"):
            message = f"{what} has no word the model knows: {ADVICE}"
        elif reason == "too-long":
            message = f"{what} is {detail}"
        else:
            message = f"{what}: {detail}"
        super().__init__(message)


def clean(text: str, what: str = "text", max_chars: int = MAX_TEXT_CHARS) -> str:
    """The cleaned text; UnusableText if over ``max_chars`` or without a letter or digit."""
    if isinstance(text, str) and len(text) > max_chars:  # before cleaning: the raw length
        raise _too_long(what, len(text), max_chars)
    try:
        cleaned = clean_text(text, sys.maxsize)
    except ParseError:  # not a string, or nothing but whitespace and control characters
        raise UnusableText(what, "no-words") from None
    if len(cleaned) > max_chars:  # NFC can lengthen a text
        raise _too_long(what, len(cleaned), max_chars)
    if not any(c.isalnum() for c in cleaned):
        raise UnusableText(what, "no-words")
    return cleaned


def _too_long(what: str, length: int, max_chars: int) -> UnusableText:
    return UnusableText(what, "too-long", f"{length} characters long; the limit is {max_chars}")


def labels(n: int, noun: str = "caption") -> list[str]:
    """How ``n`` texts are named in errors: ``"caption"`` alone, else ``"caption 1"``, …"""
    return [noun] if n == 1 else [f"{noun} {i + 1}" for i in range(n)]


def parse_each(parse: ParseFn, texts: Sequence[str]) -> list[DependencyTree | ParseError]:
    """One batch through ``parse``; if a text spoils it, each text alone."""
    if not texts:
        return []
    try:
        outcomes = list(parse(list(texts)))
    except ParseError:
        outcomes = [_parse_one(parse, t) for t in texts]
    return [o if isinstance(o, DependencyTree) else _as_parse_error(o) for o in outcomes]


def _parse_one(parse: ParseFn, text: str) -> DependencyTree | BaseException:
    try:
        return parse([text])[0]
    except ParseError as exc:
        return exc


def _as_parse_error(outcome: BaseException) -> ParseError:
    if isinstance(outcome, ParseError):
        return outcome
    raise outcome  # a crashed parser is no verdict on the text


@dataclass(frozen=True)
class Outcome:
    """One text through the door: its tree, or why it has none."""

    text: str
    tree: DependencyTree | None = None
    error: UnusableText | None = None


class Sentences:
    """Texts into trees and vectors for one model, through one parse callable."""

    def __init__(
        self, model: SentenceModel | None, parse: ParseFn, max_chars: int = MAX_TEXT_CHARS
    ) -> None:
        #: None: trees only (training parses before its model exists).
        self.model, self.parse, self.max_chars = model, parse, max_chars

    def clean(self, text: str, what: str = "text") -> str:
        return clean(text, what, self.max_chars)

    def outcomes(
        self, texts: Sequence[str], whats: Sequence[str] | None = None, cleaned: bool = False
    ) -> list[Outcome]:
        """One outcome per text, in order (``cleaned``: the texts come from ``clean``)."""
        whats = list(whats) if whats is not None else ["text"] * len(texts)
        out: list[Outcome] = [Outcome(t) for t in texts]
        todo: list[tuple[int, str]] = []
        for i, (text, what) in enumerate(zip(texts, whats, strict=True)):
            try:
                todo.append((i, text if cleaned else self.clean(text, what)))
            except UnusableText as exc:
                out[i] = Outcome(text, error=exc)
        parsed = parse_each(self.parse, [c for _, c in todo])
        for (i, _), tree in zip(todo, parsed, strict=True):
            if isinstance(tree, ParseError):
                out[i] = Outcome(texts[i], error=UnusableText(whats[i], "unparsable", str(tree)))
            elif self.model is not None and not self._knows(tree, whats[i]):
                out[i] = Outcome(texts[i], error=UnusableText(whats[i], "unknown-words"))
            else:
                out[i] = Outcome(texts[i], tree=tree)
        return out

    def _knows(self, tree: DependencyTree, what: str) -> bool:
        assert self.model is not None
        try:
            self.model.require_known_words([tree], what)
        except NoKnownWordError:
            return False
        return True

    def trees(
        self, texts: Sequence[str], whats: Sequence[str] | None = None, cleaned: bool = False
    ) -> list[DependencyTree]:
        """Every text's tree; the first unusable text's UnusableText otherwise."""
        found = self.outcomes(texts, whats, cleaned)
        if errors := [o.error for o in found if o.error is not None]:
            raise errors[0]
        return [o.tree for o in found if o.tree is not None]

    def usable(
        self, texts: Sequence[str], whats: Sequence[str] | None = None
    ) -> tuple[list[tuple[str, DependencyTree]], list[UnusableText]]:
        """The usable texts with their trees (in order), and why each other one is not."""
        kept, refused = [], []
        for o in self.outcomes(texts, whats):
            if o.tree is not None:
                kept.append((o.text, o.tree))
            elif o.error is not None:
                refused.append(o.error)
        return kept, refused

    def embed(self, trees: Sequence[DependencyTree]) -> np.ndarray:
        """Sentence vectors of usable trees (one row each)."""
        assert self.model is not None, "a door without a model gives trees only"
        return self.model.embed_sentences(list(trees))

    def vectors(
        self, texts: Sequence[str], whats: Sequence[str] | None = None, cleaned: bool = False
    ) -> np.ndarray:
        """Sentence vectors of ``texts``, one row each; UnusableText for the first refused."""
        return self.embed(self.trees(texts, whats, cleaned))

    def usable_vectors(
        self, texts: Sequence[str], chunk: int = 2048
    ) -> tuple[list[str], np.ndarray, list[UnusableText]]:
        """The usable texts (as cleaned) with their vectors, in chunks; the others left out
        with their reasons (what a caption bank or a corpus needs)."""
        kept: list[str] = []
        parts: list[np.ndarray] = []
        refused: list[UnusableText] = []
        for start in range(0, len(texts), chunk):
            part = texts[start : start + chunk]
            good, bad = self.usable(part, ["caption"] * len(part))
            refused += bad
            if good:
                parts.append(self.embed([t for _, t in good]))
                kept += [t.text for _, t in good]
        return kept, np.concatenate(parts) if parts else np.zeros((0, 1), np.float32), refused
