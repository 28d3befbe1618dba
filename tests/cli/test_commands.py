"""The command line's groups: a command's arguments are read by its group's parser alone."""

from __future__ import annotations

import argparse
import subprocess
import sys

from groundsearch.cli import GROUPS, build_parser


def registered(*groups) -> set[str]:
    """The commands a parser of ``groups`` (default: every group) reads."""
    parser = build_parser(groups or GROUPS)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_each_group_declares_exactly_the_commands_it_registers():
    declared = [name for group in GROUPS for name in group.COMMANDS]
    assert len(declared) == len(set(declared))  # no command in two groups
    for group in GROUPS:
        assert set(group.COMMANDS) == registered(group), group.__name__
    assert set(declared) == registered()


def test_a_command_outside_training_starts_without_the_encoders():
    """``groundsearch index`` refusing a flag imports neither torch nor the encoders."""
    code = (
        "import sys\n"
        "from groundsearch.cli import main\n"
        "try:\n"
        "    main(['index', '.', '--workers', '-1'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 2, exc.code\n"
        "heavy = {'torch', 'groundsearch.model.runtime.encoders.registry'} & set(sys.modules)\n"
        "print(sorted(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "must be 0 or more" in out.stderr
    assert out.stdout.strip() == "[]", out.stdout
