"""Run stanza's tagger trainer from an already trained model.

stanza's parser has ``--continue_from``; its tagger does not. This wrapper adds
``--init_from MODEL``: the trainer starts from MODEL's weights (with a fresh optimizer
built from the given arguments, e.g. a lower learning rate) instead of at random.

    python -m groundsearch.model.training.parser.anneal_tagger --init_from pos.pt \
        <stanza tagger arguments>
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
