"""Write routes (HTTP.md §7) and the schema document: thin shells over ``ServerState``."""

from __future__ import annotations

from taguru_refserver.envelope import Enveloped
from taguru_refserver.routes_common import Call, RouteSpec, query_flag


def create_context(call: Call) -> object:
    return call.state.create_context(call.name, call.body)


def patch_context(call: Call) -> object:
    return call.state.patch_context(call.name, call.body)


def store_passages(call: Call) -> object:
    return call.state.store_passages(call.name, call.body)


def add_associations(call: Call) -> object:
    applied, violations = call.state.add_associations(call.name, call.body)
    return Enveloped(applied, violations)


def put_schema(call: Call) -> object:
    return call.state.put_schema(call.name, call.body)


def get_schema(call: Call) -> object:
    return call.state.get_schema(call.name)


def register_aliases(call: Call) -> object:
    return call.state.register_aliases(call.name, call.body)


def remove_aliases(call: Call) -> object:
    return call.state.remove_aliases(call.name, call.body)


def retract_source(call: Call) -> object:
    return call.state.retract_source(call.name, call.body, dry_run=query_flag(call, "dry_run"))


def retract_association(call: Call) -> object:
    return call.state.retract_association(call.name, call.body)


WRITE_ROUTES: list[RouteSpec] = [
    RouteSpec("PUT", "/contexts/{name}", "write", create_context, body="optional"),
    RouteSpec("PATCH", "/contexts/{name}", "write", patch_context, body="json"),
    RouteSpec("POST", "/contexts/{name}/sources", "write", store_passages, body="json"),
    RouteSpec("POST", "/contexts/{name}/associations", "write", add_associations, body="json"),
    RouteSpec("POST", "/contexts/{name}/aliases", "write", register_aliases, body="json"),
    # Not in HTTP.md §5's role table, whose rule for unlisted routes is admin;
    # reading the document back is a plain read.
    RouteSpec("PUT", "/contexts/{name}/schema", "admin", put_schema, body="json"),
    RouteSpec("GET", "/contexts/{name}/schema", "read", get_schema),
    RouteSpec("DELETE", "/contexts/{name}/aliases", "write", remove_aliases, body="json"),
    RouteSpec("POST", "/contexts/{name}/sources/retract", "write", retract_source, body="json"),
    RouteSpec(
        "POST", "/contexts/{name}/associations/retract", "write", retract_association, body="json"
    ),
]
