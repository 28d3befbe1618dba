"""Words of a plain sentence by rules, as stanza's EWT tokenizer makes them.

The rules cover what queries and captions mostly are: words, numbers, commas, a final
full stop, brackets and possessive ``'s``. Anything else — hyphens (which the EWT
tokenizer splits in some words and not in others), other apostrophes, a mark inside the
text (abbreviations, decimals, several sentences), letters glued to digits, runs of
marks, quotes, colons — is declined (None), and the caller parses that text with the
full pipeline. Measured against the pipeline on every Flickr8k and cc-web caption in
docs/PARSER.md.
"""

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
    if any(mark in text.rstrip(" .!?") for mark in ".!?"):
        return None
    if "'" in text and _OTHER_APOSTROPHE.search(text):
        return None
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != text.replace(" ", ""):
        return None
    words: list[str] = []
    for token in tokens:
        words.extend(_SPLIT.get(token, (token,)))
    return words
