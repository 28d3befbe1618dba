"""``python -m groundsearch.cli``: the ``groundsearch`` command."""

import sys

from groundsearch.cli import main

sys.exit(main())
