"""Photos into a gallery: ``groundsearch index`` (``indexer``; the files each run records:
``indexing_runs``), watched folders, the old format's migration (``migrate``), the
default galleries and the shipped sample photos."""
