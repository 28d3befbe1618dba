"""The parse, today's stanza pipeline beside the direct path, on the same sentences.

    python bench/parse_throughput.py                  # 300 single queries, 4,000 captions
    python bench/parse_throughput.py --corpus 40460   # every Flickr8k caption

Both parsers load the same models; neither uses the parse cache, so every text is
really parsed. The direct path is timed twice: as a server runs it (its parser processes
warmed with the commonest words, ``ServiceSettings.parse_warm_words``) and cold (every
word of a query new to it, as in a one-shot command). In one process and one torch
thread, alternating the parsers text by text (single queries) and corpus by corpus, so
all see the same machine. Reports, as JSON: single-query p50/p90/p99 of each and their
ratio, where the time of each goes stage by stage (for one query and for a batch),
batched throughput (the caption bank's path) and how many trees are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.parsing import networks
from groundsearch.model.runtime.parsing.direct import tree_heads
from groundsearch.model.runtime.parsing.parser import Parser
from groundsearch.model.runtime.parsing.rules import rule_tokenize
from groundsearch.model.runtime.parsing.tree import build_tree
from groundsearch.service.core.settings import ServiceSettings

sys.path.insert(0, str(Path(__file__).parent))
from common import latency


def flickr_captions(data_dir: Path) -> list[str]:
    path = data_dir / "flickr8k" / "Flickr8k.token.txt"
    if not path.exists():
        raise SystemExit(f"captions not found: {path} (set GROUNDSEARCH_DATA_DIR)")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1].strip() for line in lines if "\t" in line]


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, 1000 * (time.perf_counter() - start)


def pipeline_stages(parser: Parser, texts: list[str]) -> dict[str, float]:
    """Mean ms per call of each stanza processor over ``texts`` (one call each)."""
    import stanza

    totals: dict[str, float] = {}
    for text in texts:
        doc = stanza.Document([], text=text)
        for name, processor in parser.pipeline.processors.items():
            doc, ms = timed(lambda p=processor, d=doc: p.process(d))
            totals[name] = totals.get(name, 0.0) + ms
    return {k: round(v / len(texts), 2) for k, v in totals.items()}


class Stages:
    """Milliseconds summed by stage name: ``with stages("tagger"): ...``."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._name = ""

    def __call__(self, name: str) -> Stages:
        self._name = name
        return self

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        spent = 1000 * (time.perf_counter() - self._start)
        self.ms[self._name] = self.ms.get(self._name, 0.0) + spent


def direct_stages(parser: Parser, texts: list[str]) -> dict[str, float]:
    """Mean ms per call of each stage of the direct path (texts it tokenizes itself)."""
    direct = parser.direct_parser
    stage, n = Stages(), 0
    with torch.inference_mode():
        for text in texts:
            with stage("tokenize (rules)"):
                words = rule_tokenize(text)
            if words is None:
                continue
            n += 1
            with stage("tagger"):
                tags = networks.tag(
                    direct.tagger, direct.tagger_rows, direct.tagger_network, [words]
                )
            with stage("lemmas"):
                lemmas = direct.lemmas([words], tags)
            with stage("parser: arcs and relations"):
                scores, labels = networks.arc_scores(
                    direct.depparse,
                    direct.parser_rows,
                    direct.parser_network,
                    direct.root,
                    [words],
                    tags,
                    lemmas,
                )
            with stage("parser: tree"):
                heads = [tree_heads(x) for x in scores]
            with stage("parser: relations"):
                rels = networks.relations(direct.depparse, labels, heads)
            with stage("tree"):
                upos, xpos, feats = (list(column) for column in zip(*tags[0], strict=True))
                build_tree(text, words, lemmas[0], upos, xpos, feats, heads[0], rels[0])
    return {k: round(v / n, 3) for k, v in stage.ms.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--single", type=int, default=300, help="queries parsed one at a time")
    ap.add_argument("--corpus", type=int, default=4000, help="captions parsed in batches")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument(
        "--warm-words",
        type=int,
        default=ServiceSettings.model_fields["parse_warm_words"].default,
        help="commonest words the served direct path computes at start (the server's default)",
    )
    args = ap.parse_args()

    torch.set_num_threads(1)
    settings = get_settings()
    captions = flickr_captions(settings.data_dir)
    rng = random.Random(0)
    pool = sorted({c for c in captions if len(c.split()) <= 12})
    queries = rng.sample(pool, min(args.single, len(pool)))
    corpus = rng.sample(captions, min(args.corpus, len(captions)))

    pipeline = Parser(settings.parser_dir, settings.cache_dir, use_cache=False, direct=False)
    direct = Parser(settings.parser_dir, settings.cache_dir, use_cache=False)
    cold = Parser(settings.parser_dir, settings.cache_dir, use_cache=False)
    _, load_ms = timed(lambda: pipeline.parse(queries[:5]))
    _, warm_ms = timed(lambda: direct.warm(args.warm_words))  # with loading its models
    direct.parse(queries[:5])
    cold.parse(queries[:5])

    single: dict[str, list[float]] = {"pipeline": [], "direct": [], "direct_cold": []}
    same = same_cold = 0
    for text in queries:
        a, ms_a = timed(lambda t=text: pipeline.parse_one(t))
        b, ms_b = timed(lambda t=text: direct.parse_one(t))
        c, ms_c = timed(lambda t=text: cold.parse_one(t))
        single["pipeline"].append(ms_a)
        single["direct"].append(ms_b)
        single["direct_cold"].append(ms_c)
        same += a == b
        same_cold += a == c

    batched: dict[str, float] = {}
    trees = {}
    for name, parser in (("pipeline", pipeline), ("direct", direct)):
        trees[name], ms = timed(lambda p=parser: p.parse(corpus, batch_size=args.batch_size))
        batched[name] = ms / 1000
    corpus_same = sum(a == b for a, b in zip(trees["pipeline"], trees["direct"], strict=True))  # type: ignore[call-overload]

    p50 = {k: statistics.median(v) for k, v in single.items()}
    print(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "torch_threads": 1,
                "parser": direct.version,
                "first_parse_with_loading_s": round(load_ms / 1000, 2),
                "warm_words": args.warm_words,
                "loading_and_warming_s": round(warm_ms / 1000, 2),
                "single": {
                    "queries": len(queries),
                    "mean_words": round(statistics.mean(len(t.split()) for t in queries), 1),
                    "pipeline": latency(single["pipeline"], (50, 90, 99)),
                    "direct": latency(single["direct"], (50, 90, 99)),
                    "direct_cold": latency(single["direct_cold"], (50, 90, 99)),
                    "p50_ratio": round(p50["direct"] / p50["pipeline"], 3),
                    "p50_ratio_cold": round(p50["direct_cold"] / p50["pipeline"], 3),
                    "identical_trees": f"{same}/{len(queries)}",
                    "identical_trees_cold": f"{same_cold}/{len(queries)}",
                },
                "stages_one_query_ms": {
                    "pipeline": pipeline_stages(pipeline, queries[:100]),
                    "direct": direct_stages(direct, queries[:100]),
                },
                "batched": {
                    "captions": len(corpus),
                    "pipeline_s": round(batched["pipeline"], 1),
                    "direct_s": round(batched["direct"], 1),
                    "speedup": round(batched["pipeline"] / batched["direct"], 2),
                    "captions_per_s": {k: round(len(corpus) / v, 1) for k, v in batched.items()},
                    "identical_trees": f"{corpus_same}/{len(corpus)}",
                    "declined_by_the_rules": direct.direct_parser.declined,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
