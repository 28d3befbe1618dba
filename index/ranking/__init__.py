"""The ranking of a query: its hits (``hits.Hit``, the one hit type from the gallery to
the answer), and its pages — one search and one judgement, cut into pages in one of
three orders with an opaque cursor (``pages``), for gallery photos (``photo_pages``)."""
