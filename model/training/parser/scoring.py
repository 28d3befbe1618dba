"""Score the parser from raw text with the CoNLL 2018 shared-task scorer.

The gold text goes through the whole pipeline, so tokenization and sentence-splitting
errors count; the scorer is the official one (``udtools.udeval``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

METRICS: tuple[str, ...] = ("Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats")
METRICS += ("AllTags", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX")


def raw_text(gold: Path) -> str:
    """The running text of a CoNLL-U file, one paragraph per block."""
    from stanza.utils.datasets.conllu_to_text import convert_text

    with tempfile.NamedTemporaryFile("r", suffix=".txt") as tmp:
        convert_text(str(gold), tmp.name)
        return Path(tmp.name).read_text(encoding="utf-8")


def evaluate_files(gold: Path, system: Path) -> dict[str, float]:
    """F1 (×100) of each CoNLL 2018 metric."""
    from udtools import udeval

    kept = "gapping shared_parents_in_coordination shared_dependents_in_coordination control"
    kept += " external_arguments_of_relative_clauses case_info"
    kind: dict[str, int | bool] = {f"no_{k}": 0 for k in kept.split()}
    kind.update(no_empty_nodes=False, multiple_roots_okay=False)
    result = udeval.evaluate(
        udeval.load_conllu_file(str(gold), kind), udeval.load_conllu_file(str(system), kind)
    )
    return {m: round(100 * result[m].f1, 2) for m in METRICS}


def score_raw_text(
    gold: Path, parser_dir: Path, cache_dir: Path, output: Path | None = None
) -> dict[str, object]:
    """Parse the raw text of ``gold`` with the models in ``parser_dir`` and score it."""
    from stanza.utils.conll import CoNLL

    from groundsearch.model.runtime.parsing.parser import load_pipeline, parser_version

    nlp = load_pipeline(parser_dir, cache_dir)
    text = raw_text(gold)
    start = time.perf_counter()
    doc = nlp(text)
    seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        system = Path(output) if output else Path(tmp) / "system.conllu"
        CoNLL.write_doc2conll(doc, str(system))
        scores = evaluate_files(gold, system)
    return {
        "gold": str(gold),
        "parser": parser_version(parser_dir),
        "parse_seconds": round(seconds, 1),
        "f1": scores,
    }
