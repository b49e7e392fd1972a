"""Context schema documents: decoding and installing them (judging writes: :mod:`.schema_judge`).

Just enough of taguru's schemas (``PUT``/``GET /contexts/{name}/schema``) to
serve ``DirectoryEntry.schema_mode`` and the ``warn``-mode success envelope of
``wire/add_associations_warn.json``: entity types with an ``is_a`` hierarchy,
relation labels with ``domain``/``range`` type sets, and ``schema:type``
associations asserting a concept's types. A write is judged against the live
type assertions plus the batch's own (so line order inside a batch never
matters); ``warn`` reports the violations beside the result, ``strict``
refuses the batch, ``off`` judges nothing. Type assertions themselves are
never judged. The audit/validate routes, ``types`` on resolve candidates and
type filters on query are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from taguru_refserver.envelope import ApiError
from taguru_refserver.routes_bodies import (
    DESERIALIZE_PREFIX,
    Fields,
    as_bool,
    as_list,
    as_object,
    as_str,
    as_uint,
    join,
)

SCHEMA_VERSION = 1
SCHEMA_TYPE_LABEL = "schema:type"
MODES = ("off", "warn", "strict")
MAX_SCHEMA_TYPES = 500
MAX_SCHEMA_RELATIONS = 500
MAX_RELATION_TYPES = 64
MAX_TYPE_DEPTH = 8
MAX_SCHEMA_NAME_BYTES = 1024
MAX_ISSUE_TYPE_NAMES = 8

_DOCUMENT_FIELDS = ("schema", "mode", "closed_labels", "types", "relations")


@dataclass(frozen=True)
class Relation:
    domain: frozenset[str]
    range: frozenset[str]


@dataclass(frozen=True)
class InstalledSchema:
    """A validated schema document plus every declared type's ``is_a`` ancestors."""

    mode: str
    closed_labels: bool
    types: Mapping[str, frozenset[str]]  # declared type -> direct parents
    relations: Mapping[str, Relation]
    ancestors: Mapping[str, frozenset[str]]

    def to_wire(self) -> dict[str, object]:
        """The document as installed (what ``PUT`` answers and ``GET`` serves)."""
        return {
            "schema": SCHEMA_VERSION,
            "mode": self.mode,
            "closed_labels": self.closed_labels,
            "types": {name: {"is_a": sorted(p)} for name, p in sorted(self.types.items())},
            "relations": {
                label: {"domain": sorted(r.domain), "range": sorted(r.range)}
                for label, r in sorted(self.relations.items())
            },
        }

    def closure_of(self, type_name: str) -> frozenset[str]:
        """The type plus its ancestors; an undeclared type is its own singleton."""
        return self.ancestors.get(type_name, frozenset()) | {type_name}


# -- decoding and install ----------------------------------------------------------


def _deny_unknown(fields: Fields, allowed: tuple[str, ...]) -> None:
    for key in fields.data:
        if key not in allowed:
            where = f"{fields.path}: " if fields.path else ""
            expected = ", ".join(f"`{k}`" for k in allowed)
            raise ApiError(
                "malformed_request",
                f"{DESERIALIZE_PREFIX}{where}unknown field `{key}`, expected one of {expected}",
                status=422,
            )


def _name_set(value: object, path: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    items = as_list(value, path)
    return frozenset(as_str(item, f"{path}[{index}]") for index, item in enumerate(items))


def decode_schema(body: object) -> InstalledSchema:
    """A ``PUT …/schema`` body as an installed schema, or its 422/400 refusal."""
    fields = Fields(body, what="struct SchemaDocument")
    _deny_unknown(fields, _DOCUMENT_FIELDS)
    version = as_uint(fields.required("schema"), "schema", "u64")
    mode = as_str(fields.required("mode"), "mode")
    if mode not in MODES:
        raise ApiError(
            "malformed_request",
            f"{DESERIALIZE_PREFIX}mode: unknown variant `{mode}`, expected one of "
            + ", ".join(f"`{m}`" for m in MODES),
            status=422,
        )
    closed_labels = as_bool(fields.required("closed_labels"), "closed_labels")
    types: dict[str, frozenset[str]] = {}
    for name, raw in as_object(fields.required("types"), "types", "a map").items():
        entry = Fields(raw, join("types", name), "struct TypeDef")
        _deny_unknown(entry, ("is_a",))
        types[name] = _name_set(entry.data.get("is_a"), entry.at("is_a"))
    relations: dict[str, Relation] = {}
    for label, raw in as_object(fields.required("relations"), "relations", "a map").items():
        entry = Fields(raw, join("relations", label), "struct RelationDef")
        _deny_unknown(entry, ("domain", "range"))
        relations[label] = Relation(
            _name_set(entry.data.get("domain"), entry.at("domain")),
            _name_set(entry.data.get("range"), entry.at("range")),
        )
    return install(version, mode, closed_labels, types, relations)


def _invalid(message: str) -> ApiError:
    return ApiError("invalid_argument", message)


def install(
    version: int,
    mode: str,
    closed_labels: bool,
    types: dict[str, frozenset[str]],
    relations: dict[str, Relation],
) -> InstalledSchema:
    """Validate a decoded document (version, caps, reserved label, ``is_a`` shape)."""
    if version != SCHEMA_VERSION:
        raise _invalid(
            f"schema version {version} is not {SCHEMA_VERSION}, the only version this binary reads"
        )
    if len(types) > MAX_SCHEMA_TYPES:
        raise _invalid(f"{len(types)} types is over the {MAX_SCHEMA_TYPES}-type cap")
    if len(relations) > MAX_SCHEMA_RELATIONS:
        raise _invalid(
            f"{len(relations)} relations is over the {MAX_SCHEMA_RELATIONS}-relation cap"
        )
    if SCHEMA_TYPE_LABEL in relations:
        raise _invalid(
            f"relation '{SCHEMA_TYPE_LABEL}' is reserved for type assertions — rename it"
        )
    mentioned = [*types, *relations]
    mentioned += [p for parents in types.values() for p in parents]
    mentioned += [t for r in relations.values() for t in (*r.domain, *r.range)]
    for name in sorted(mentioned):
        if len(name.encode("utf-8")) > MAX_SCHEMA_NAME_BYTES:
            raise _invalid(f"'{name}' is over the {MAX_SCHEMA_NAME_BYTES}-byte name cap")
    for label, relation in sorted(relations.items()):
        for side, names in (("domain", relation.domain), ("range", relation.range)):
            if len(names) > MAX_RELATION_TYPES:
                raise _invalid(
                    f"relation '{label}' names {len(names)} {side} types, over the "
                    f"{MAX_RELATION_TYPES}-type cap"
                )
    ancestors = _ancestors(types)
    return InstalledSchema(mode, closed_labels, types, relations, ancestors)


def _ancestors(types: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Every declared type's transitive parents; refuses cycles and chains over 8 types."""
    closed: dict[str, frozenset[str]] = {}
    depth: dict[str, int] = {}

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in closed:
            return
        if name in trail:
            raise _invalid(f"type '{name}' is_a reaches itself through a cycle")
        reached: set[str] = set()
        longest = 0
        for parent in sorted(types[name]):
            reached.add(parent)
            if parent in types:
                visit(parent, (*trail, name))
                reached |= closed[parent]
                longest = max(longest, depth[parent])
            else:
                longest = max(longest, 1)
        depth[name] = longest + 1
        if depth[name] > MAX_TYPE_DEPTH:
            raise _invalid(
                f"the is_a chain under type '{name}' stacks more than {MAX_TYPE_DEPTH} types"
            )
        closed[name] = frozenset(reached)

    for name in sorted(types):
        visit(name, ())
    return closed
