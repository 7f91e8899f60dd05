"""How many best-scored matches a ranked read joins with the stores before it checks it is done.

A strict relevance page (``query.execute._relevance_page``) and hybrid's word lists
(``ranked._pooled``) score every match with bm25 but join only the best of them with the
messages and units their filters need: at first ``POOL_FACTOR`` times the rows they return (at
least ``POOL_MIN``), growing ``POOL_GROWTH``-fold until the answer is provably whole.
"""

from __future__ import annotations

__all__ = ["POOL_FACTOR", "POOL_GROWTH", "POOL_MIN"]

POOL_FACTOR = 4
POOL_MIN = 256
POOL_GROWTH = 8
