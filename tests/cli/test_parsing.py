"""The ``groundsearch`` command as a user runs it."""

from __future__ import annotations


def test_parse_prints_the_tree(cli):
    out = cli("parse", "A man wearing a helmet jumps on his bike near a beach.")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "# A man wearing a helmet jumps on his bike near a beach."
    assert lines[1].startswith("jumps  [root, VERB, ℓ=13]")
    assert any("bike  [obl:on" in line for line in lines)


def test_parse_conllu_and_stdin(cli):
    out = cli("parse", "--conllu", stdin="Students ride bikes at night.\n\n")
    assert out.returncode == 0, out.stderr
    rows = [r.split("\t") for r in out.stdout.splitlines() if r and not r.startswith("#")]
    assert [r[1] for r in rows] == ["Students", "ride", "bikes", "at", "night", "."]
    assert rows[4][8] == "2:obl:at"


def test_parse_empty_text_is_an_error_not_a_traceback(cli):
    out = cli("parse", "   ")
    assert out.returncode == 2
    assert "error: text 0: text is empty" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_stage_is_named(cli, tmp_path):
    out = cli("train-parser", "--stages", "nonsense", "--work-dir", str(tmp_path))
    assert out.returncode == 2
    assert "unknown stage(s) ['nonsense']" in out.stderr
