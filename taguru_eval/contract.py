"""Fixed names: the routes evaluate and load call, taguru's write caps, the artifact's
file name and stamp, this build's version.

Each is written once here; the lanes, the call records, the catalog's
``source`` strings, the artifact reader and writer, compare and the run store
all name them through these constants (HTTP.md §6, EVALUATE.md §6.1).
"""

from __future__ import annotations

from typing import Final

from taguru_eval._base.filebytes import ReadCap

SEARCH: Final = "POST /contexts/{name}/sources/search"
RESOLVE: Final = "POST /contexts/{name}/resolve"
RESOLVE_LABEL: Final = "POST /contexts/{name}/resolve_label"
QUERY: Final = "POST /contexts/{name}/query"
CITATIONS: Final = "POST /contexts/{name}/citations"
EVIDENCE: Final = "POST /contexts/{name}/evidence"
"""The route templates evaluate's lanes call, as the ``calls`` table records them."""

CREATE_CONTEXT: Final = "PUT /contexts/{name}"
PATCH_CONTEXT: Final = "PATCH /contexts/{name}"
DELETE_CONTEXT: Final = "DELETE /contexts/{name}"
STORE_SOURCES: Final = "POST /contexts/{name}/sources"
ADD_ASSOCIATIONS: Final = "POST /contexts/{name}/associations"
REGISTER_ALIASES: Final = "POST /contexts/{name}/aliases"
"""The write routes ``load`` calls (HTTP.md §7), as its messages and writes table name them."""

MAX_SOURCES_PER_REQUEST: Final = 1_000
MAX_ASSOCIATIONS_PER_REQUEST: Final = 10_000
MAX_ALIAS_PAIRS_PER_REQUEST: Final = 10_000
"""taguru's caps on one write request (HTTP.md §7.2–7.4: past them, 400 ``over_limit``)."""

DEFAULT_MAX_BODY_BYTES: Final = 8 * 1024 * 1024
"""taguru's request body cap unless its ``TAGURU_MAX_BODY_BYTES`` says otherwise (413 past it)."""

ARTIFACT_NAME: Final = "evaluation.json"
"""The artifact's default file name, and its name inside a stored run directory."""

ARTIFACT_STAMP: Final = 1
"""``taguru_evaluation``: the stamp this build writes and the highest it reads (1..=N)."""

DEFAULT_LIMIT: Final = 10
"""Hits asked for when a case sets no ``options.limit`` (``inputs.default_limit``)."""

RESOLVE_LIMIT: Final = 5
"""Names asked for per resolve call (``inputs.resolve_limit``, EVALUATE.md §3.5)."""

VERSION: Final = "0.1.0"
"""This build's version. pyproject.toml reads it from here (a dynamic version),
so the package metadata states the same; reading the metadata at run time
instead costs ``--version`` a fifth of its whole time."""


_GiB: Final = 1 << 30
_MiB: Final = 1 << 20

EVAL_CAP: Final = ReadCap(4 * _GiB, "an eval set")
ARTIFACT_CAP: Final = ReadCap(4 * _GiB, "an evaluation.json")
THRESHOLDS_CAP: Final = ReadCap(256 * _MiB, "a thresholds file")
MUST_REFUSE_CAP: Final = ReadCap(256 * _MiB, "a must-refuse file")
ANSWERS_CAP: Final = ReadCap(256 * _MiB, "an answers file")
TOLERANCES_CAP: Final = ReadCap(256 * _MiB, "a tolerances file")
GOLDEN_CAP: Final = ReadCap(256 * _MiB, "a golden CSV")
IMPORT_CAP: Final = ReadCap(4 * _GiB, "a collection file (qrels, topics, BEIR jsonl)")
CONFIG_CAP: Final = ReadCap(256 * _MiB, "a config file")
"""The most each input may hold (:func:`taguru_eval._base.filebytes.file_bytes`): far
past any real file (a 100,000-case eval set is ~50 MB, its evaluation.json ~470 MB),
near enough that ``/dev/zero`` given as one is refused, not read until memory runs out."""

STORED_RATIO: Final = 1024
STORED_FLOOR: Final = 64 * _MiB
"""A stored ``evaluation.json.zst`` may decompress to ``STORED_RATIO`` times its own size,
and at least ``STORED_FLOOR`` (and never past :data:`ARTIFACT_CAP`): real artifacts
compress 8–40×, a run of identical failed cases a few hundred times; a 43.6 KB file
inflating to 1 GiB (24,000×) is a bomb, refused after 64 MiB."""
