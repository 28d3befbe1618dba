"""The pages of a query's ranking: one search and one judgement, cut into pages with an
opaque cursor (``pages``), for gallery photos (``photo_pages``)."""
