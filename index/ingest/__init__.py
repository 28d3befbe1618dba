"""Photos into a gallery: ``groundsearch index`` (``indexer``), watched folders, the
default galleries and the shipped sample photos."""
