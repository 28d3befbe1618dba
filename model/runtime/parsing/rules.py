"""Words of a plain sentence by rules, as stanza's EWT tokenizer makes them: words,
numbers, commas, a final full stop, brackets and possessive ``'s``; any other text is
declined (None), for the full pipeline to parse (docs/PARSER.md)."""

from __future__ import annotations

import re

_PLAIN = re.compile(r"^[A-Za-z0-9 ,!?.()'$%#]+$")
_TOKEN = re.compile(r"[A-Za-z]+|[0-9]+|'s\b|[,!?.()$%#]")
_GLUED = re.compile(r"[A-Za-z][0-9]|[0-9][A-Za-z]|[0-9],[0-9]|[,!?.()$%#]{2}")
_WORD = re.compile(r"[A-Za-z0-9]")
_OTHER_APOSTROPHE = re.compile(r"'(?!s\b)|(?<![A-Za-z])'s")
#: Words EWT writes as two (a multi-word token).
_SPLIT = {"cannot": ("can", "not"), "Cannot": ("Can", "not")}


def rule_tokenize(text: str) -> list[str] | None:
    """The words of a cleaned single-sentence ``text``, or None when the rules decline it."""
    if not _PLAIN.match(text) or _GLUED.search(text) or not _WORD.search(text):
        return None
    if any(mark in text.rstrip(" .!?") for mark in ".!?") or _OTHER_APOSTROPHE.search(text):
        return None
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != text.replace(" ", ""):
        return None
    return [word for token in tokens for word in _SPLIT.get(token, (token,))]
