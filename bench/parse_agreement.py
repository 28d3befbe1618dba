"""The direct parse against stanza's pipeline, tree by tree, on whole caption sets.

    python bench/parse_agreement.py                  # Flickr8k test and cc-web, every caption

Parses every caption of the Flickr8k test split (5,000) and of cc-web (17,645) with both
parsers (no parse cache, one process, one torch thread) and counts the identical trees
(every word, lemma, tag, feature, head and relation, and the sentence count), the texts
the rule tokenizer left to the pipeline, and where the differing ones differ. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import torch

from groundsearch.common.settings import get_settings
from groundsearch.model.data.sources import load_source, parse_source
from groundsearch.model.runtime.parsing.parser import Parser, clean_text
from groundsearch.model.runtime.parsing.rules import rule_tokenize
from groundsearch.model.runtime.parsing.tree import DependencyTree


def difference(a: DependencyTree, b: DependencyTree) -> str:
    """What differs first: the words, the tags, the heads, the relations or the lemmas."""
    if [n.text for n in a] != [n.text for n in b]:
        return "words"
    if [(n.upos, n.xpos, n.feats) for n in a] != [(n.upos, n.xpos, n.feats) for n in b]:
        return "tags"
    if [n.head for n in a] != [n.head for n in b]:
        return "heads"
    if [n.deprel for n in a] != [n.deprel for n in b]:
        return "relations"
    if a.sentences != b.sentences:
        return "sentences"
    return "lemmas"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", default="flickr8k:test,cc-web:train+dev")
    ap.add_argument("--limit", type=int, default=0, help="only the first N of each")
    args = ap.parse_args()
    torch.set_num_threads(1)
    settings = get_settings()
    pipeline = Parser(settings.parser_dir, settings.cache_dir, use_cache=False, direct=False)
    direct = Parser(settings.parser_dir, settings.cache_dir, use_cache=False)
    report = {}
    for spec in args.sources.split(","):
        name, _, splits = spec.partition(":")
        source = parse_source(name, settings.data_dir)
        texts: list[str] = []
        for split in splits.split("+"):
            texts += load_source(source, split).captions
        texts = sorted({clean_text(t) for t in texts})  # the cleaned text is what is parsed
        if args.limit:
            texts = texts[: args.limit]
        start = time.perf_counter()
        old = pipeline.parse(texts)
        old_s = time.perf_counter() - start
        start = time.perf_counter()
        new = direct.parse(texts)
        new_s = time.perf_counter() - start
        kinds = Counter(difference(a, b) for a, b in zip(old, new, strict=True) if a != b)
        same = len(texts) - sum(kinds.values())
        report[spec] = {
            "captions": len(texts),
            "identical": same,
            "identical_share": round(same / len(texts), 4),
            "differ_in": dict(kinds),
            "declined_by_the_rules": sum(rule_tokenize(t) is None for t in texts),
            "pipeline_s": round(old_s, 1),
            "direct_s": round(new_s, 1),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
