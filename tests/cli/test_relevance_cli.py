"""``fit-relevance`` and ``evaluate-relevance`` options (the commands themselves embed a
whole split: documented runs, not tests)."""

from __future__ import annotations

import pytest

from groundsearch.cli import build_parser
from groundsearch.cli import relevance as cli
from groundsearch.model.training.relevance import CONCEPTS, FORMS_ONLY


def test_forms_only_asks_the_concepts_without_their_kinds():
    parser = build_parser()
    for command in ("fit-relevance", "evaluate-relevance"):
        assert cli._concepts(parser.parse_args([command])) == CONCEPTS
        assert cli._concepts(parser.parse_args([command, "--forms-only"])) == FORMS_ONLY


def test_a_nouns_table_that_is_not_there_is_refused_at_the_flag(tmp_path, capsys):
    parser = build_parser()
    table = tmp_path / "nouns.tsv"
    table.write_text("noun\tclasses\n", encoding="utf-8")
    assert parser.parse_args(["evaluate-relevance", "--nouns", str(table)]).nouns == str(table)
    assert parser.parse_args(["fit-relevance", "--nouns", "none"]).nouns == "none"
    with pytest.raises(SystemExit):
        parser.parse_args(["fit-relevance", "--nouns", str(tmp_path / "missing.tsv")])
    assert "no noun -> classes table" in capsys.readouterr().err
