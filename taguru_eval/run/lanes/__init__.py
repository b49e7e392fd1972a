"""The lanes wing of run mode: one module per lane, each decoding with msgspec Structs.

``passage``, ``structural``, ``citations``, ``evidence`` (``--assembly``),
``probes`` (must-refuse) and ``bands`` (refusal-bands), beside ``record``
(a case's call records), ``budget`` (§7.3 truncation) and ``case`` (one eval
case's lanes in order). They speak HTTP only through :mod:`taguru_eval.run.http`.
"""
