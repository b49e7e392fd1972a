"""Typed readers of the payload pieces more than one lane reads (HTTP.md §6.5, §6.7, §6.9).

A passage hit, a lane plan and an association (``AssociationOut``) have one
shape whether they arrive in a ``sources/search`` page, a ``query`` page or
an evidence package, so each is read in one place. Every reader takes a
parsed JSON value and its path and raises :class:`~taguru_eval._base.jsonstrict.JsonShapeError`
(serde-like wording) when the value does not fit; unknown keys are ignored,
as in every server response.
"""

from __future__ import annotations

from collections.abc import Mapping

from taguru_eval._base import jsonstrict as js
from taguru_eval.run.budget import MeasuredHit
from taguru_eval.tables.shapes import Attribution, LanePlan, LaneScore


def require(obj: Mapping[str, object], key: str, path: js.JsonPath) -> object:
    """``obj[key]``, or serde's ``missing field `key``` at ``path``."""
    if key not in obj:
        raise js.JsonShapeError(path, f"missing field `{key}`")
    return obj[key]


def read_lane_plan(value: object, path: js.JsonPath) -> LanePlan:
    """``{ran, reason?, floor?}`` (a null ``reason``/``floor`` reads as absent)."""
    obj = js.read_object(value, path)
    plan = LanePlan(ran=js.read_bool(require(obj, "ran", path), (*path, "ran")))
    reason = obj.get("reason")
    if reason is not None:
        plan["reason"] = js.read_str(reason, (*path, "reason"))
    floor = obj.get("floor")
    if floor is not None:
        plan["floor"] = js.read_f32(floor, (*path, "floor"))
    return plan


def read_lane_score(value: object, path: js.JsonPath) -> LaneScore:
    """``{rank, score}`` of one retrieval lane of a hit (score binary32)."""
    obj = js.read_object(value, path)
    return LaneScore(
        rank=js.read_u64(require(obj, "rank", path), (*path, "rank")),
        score=js.read_f32(require(obj, "score", path), (*path, "score")),
    )


def read_passage_hit(value: object, path: js.JsonPath) -> MeasuredHit:
    """A ``PassageHit``: ``{source, paragraph, score, text, lanes?}``, text kept for a budget."""
    obj = js.read_object(value, path)
    source = js.read_str(require(obj, "source", path), (*path, "source"))
    paragraph = js.read_u32(require(obj, "paragraph", path), (*path, "paragraph"))
    score = js.read_f32(require(obj, "score", path), (*path, "score"))
    # `text` must be there for the typed shape (§3.4); only a budget measures it.
    text = js.read_str(require(obj, "text", path), (*path, "text"))
    lanes: dict[str, LaneScore] = {}
    # An absent `lanes` object reads as no lane evidence (serde default).
    raw_lanes = obj.get("lanes")
    if raw_lanes is not None:
        lanes_path = (*path, "lanes")
        lanes_obj = js.read_object(raw_lanes, lanes_path)
        for lane in ("bm25", "vector"):
            raw = lanes_obj.get(lane)
            if raw is not None:
                lanes[lane] = read_lane_score(raw, (*lanes_path, lane))
    return MeasuredHit(source=source, paragraph=paragraph, score=score, text=text, lanes=lanes)


def _read_attribution(value: object, path: js.JsonPath) -> Attribution:
    obj = js.read_object(value, path)
    source = js.read_str(require(obj, "source", path), (*path, "source"))
    js.read_f64(require(obj, "weight", path), (*path, "weight"))
    js.read_u64(require(obj, "count", path), (*path, "count"))
    paragraph = js.read_optional(obj.get("paragraph"), (*path, "paragraph"), js.read_u32)
    section = obj.get("section")
    if section is not None:
        js.read_str(section, (*path, "section"))
    return Attribution(source=source, paragraph=paragraph)


def read_association(value: object, path: js.JsonPath) -> list[Attribution]:
    """An ``AssociationOut`` (subject, label, object, weight, count, attributions):
    the locators of its attributions, in order."""
    obj = js.read_object(value, path)
    for key in ("subject", "label", "object"):
        js.read_str(require(obj, key, path), (*path, key))
    js.read_f64(require(obj, "weight", path), (*path, "weight"))
    js.read_u64(require(obj, "count", path), (*path, "count"))
    return js.read_array(
        require(obj, "attributions", path), (*path, "attributions"), _read_attribution
    )
