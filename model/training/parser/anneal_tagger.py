"""Run stanza's tagger trainer from an already trained model.

Adds ``--init_from MODEL`` to stanza's tagger trainer: it starts from MODEL's weights
(with a fresh optimizer) instead of at random.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str]) -> None:
    import stanza.models.tagger as tagger

    if "--init_from" not in argv:
        raise SystemExit("anneal_tagger: --init_from MODEL is required")
    i = argv.index("--init_from")
    init = argv[i + 1]
    argv = argv[:i] + argv[i + 2 :]
    original = tagger.Trainer

    def trainer(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("model_file") is None:
            kwargs["model_file"] = init
        return original(*args, **kwargs)

    tagger.Trainer = trainer
    tagger.main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
