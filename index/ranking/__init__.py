"""The pages of a query's ranking (its types, ``Ranking`` and ``Hit``, are the gallery's:
``index.hits``): one search and one judgement, cut into pages in one of three orders
with an opaque cursor (``pages``), for gallery photos (``photo_pages``)."""
