"""Photo filters: the conditions (``conditions``, where each filter is declared once),
their columns in memory, their SQL, and searches narrowed by them."""
