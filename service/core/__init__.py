"""The service's application core: what it loads once (``components``), what it does
(``capabilities``) and the machinery they share (queries, ranking pages, relevance,
writing, photo vectors and workers, batching, watching, shards) — no HTTP in here."""
