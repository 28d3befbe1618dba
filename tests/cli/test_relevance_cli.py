"""``fit-relevance`` and ``evaluate-relevance`` options (the commands themselves embed a
whole split: documented runs, not tests)."""

from __future__ import annotations

from groundsearch.cli import build_parser
from groundsearch.cli import relevance as cli
from groundsearch.model.training.relevance import CONCEPTS, FORMS_ONLY


def test_forms_only_asks_the_concepts_without_their_kinds():
    parser = build_parser()
    for command in ("fit-relevance", "evaluate-relevance"):
        assert cli._concepts(parser.parse_args([command])) == CONCEPTS
        assert cli._concepts(parser.parse_args([command, "--forms-only"])) == FORMS_ONLY
