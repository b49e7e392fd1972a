"""Scoring (EVALUATE.md §4) and aggregation (§5.2) as Polars expressions.

Everything here is a pure function of the run's tables and the eval set's
``expected`` frame; no score served by the server is ever read. The steps:
:mod:`.match` (expectations against hits), :mod:`.recall` (recall@k, MRR,
nDCG), :mod:`.blocks` (coverage, citations, misses), :mod:`.cases` (the
per-case frame), :mod:`.aggregate` (the run's metrics) and :mod:`.stats`
(Distribution, Ratio, nearest rank)."""
