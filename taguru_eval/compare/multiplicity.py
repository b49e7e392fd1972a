"""Multiplicity control: p-values adjusted for the number of tests one compare makes.

One ``compare --significance`` tests nine metrics (times every tag slice with
``--by-tag``); at ``alpha`` 0.05 each, some test of an unchanged pair would
come out "significant" far more often than one time in twenty. Adjusting the
p-values over the whole family before judging them bounds that:

* ``holm`` — Holm's step-down procedure: the family-wise error rate (the chance
  of any false alarm) is at most ``alpha``, under any dependence between the
  tests. The ``i``-th smallest of ``m`` p-values is multiplied by
  ``m - i + 1``, then made monotone (a running maximum) and capped at 1.
* ``bh`` — Benjamini–Hochberg step-up: the false discovery rate (the expected
  share of false alarms among the tests called significant) is at most
  ``alpha`` for independent or positively dependent tests. The ``i``-th smallest is
  multiplied by ``m / i``, then made monotone from the largest down (a running
  minimum) and capped at 1.
* ``none`` — the p-values as they are (each test at ``alpha`` on its own).

Both match statsmodels' ``multipletests(method="holm" | "fdr_bh")``.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

import numpy as np
import numpy.typing as npt

Correction = Literal["holm", "bh", "none"]
CORRECTIONS: Final[tuple[Correction, ...]] = get_args(Correction)
DEFAULT_CORRECTION: Final[Correction] = "holm"


def adjust_p_values(p_values: npt.ArrayLike, correction: Correction) -> npt.NDArray[np.float64]:
    """The adjusted p-values of one family, in the order given.

    ``p_values`` holds every p-value of the family (each in [0, 1], none
    missing); ``ValueError`` for an unknown ``correction`` or a value outside
    [0, 1] (NaN included).
    """
    p = np.asarray(p_values, dtype=np.float64).ravel()
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}")
    if not np.all((p >= 0.0) & (p <= 1.0)):  # NaN fails too
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    if correction == "none" or m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    rank = np.arange(1, m + 1, dtype=np.float64)
    if correction == "holm":
        # A smaller p-value's adjusted value bounds every larger one's from below.
        stepped = np.maximum.accumulate(ranked * (m - rank + 1.0))
    else:
        # Step-up: a larger p-value's adjusted value bounds every smaller one's from above.
        stepped = np.minimum.accumulate((ranked * (m / rank))[::-1])[::-1]
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted
