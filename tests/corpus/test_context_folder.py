"""The context-folder reader ``serve DIR`` and ``load`` share, and its write plan:
items keep their file and line, batches keep the caps and the order, and a
refusal's issue path leads back to the line that caused it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.paths import DATA

from taguru_eval._base.text import encode_json
from taguru_eval.corpus.folder import (
    AliasPair,
    Association,
    MarkdownSource,
    holds_a_context,
    read_context_folder,
)
from taguru_eval.corpus.writes import (
    AliasesWrite,
    AssociationsWrite,
    Caps,
    Location,
    SourcesWrite,
    association_writes,
    fill_writes,
    source_writes,
    split_write,
)

WIDE = Caps(sources=1000, associations=10_000, alias_pairs=10_000)


def _lines(file: Path) -> list[str]:
    return file.read_text(encoding="utf-8").split("\n")


def test_every_section_marker_keeps_the_line_of_its_heading_or_front_matter() -> None:
    read = read_context_folder(DATA / "sake")
    checked = 0
    for source in read.sources:
        lines = _lines(source.file)
        assert len(source.section_lines) == len(source.sections)
        for marker, line in zip(source.sections, source.section_lines, strict=True):
            text = lines[line - 1]
            assert text.startswith(("#", "section:")), (source.file, line, text)
            assert str(marker["section"]) in text
            checked += 1
        if source.tags:
            assert source.tags_line is not None
            assert lines[source.tags_line - 1].startswith("tags:")
        if source.date is not None:
            assert source.date_line is not None
            assert lines[source.date_line - 1].startswith("date:")
    assert checked > 20


def test_a_folder_is_a_context_when_it_holds_one_of_the_layout_files(tmp_path: Path) -> None:
    assert holds_a_context(DATA / "sake")
    assert not holds_a_context(DATA)  # a README.md alone: a root
    (tmp_path / "README.md").write_text("about\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.md").write_text("text\n", encoding="utf-8")
    assert not holds_a_context(tmp_path)
    (tmp_path / "a.md").write_text("text\n", encoding="utf-8")
    assert holds_a_context(tmp_path)


def test_the_vector_lane_key_stays_out_of_the_settings(tmp_path: Path) -> None:
    (tmp_path / "context.json").write_text(
        '{"description": "d", "vector_lane": true}', encoding="utf-8"
    )
    read = read_context_folder(tmp_path, "named")
    assert (read.name, read.settings, read.vector_lane) == ("named", {"description": "d"}, True)


def test_aliases_go_in_the_order_a_server_applies_them() -> None:
    read = read_context_folder(DATA / "sake")
    pairs = read.alias_pairs()
    assert pairs is not None
    aliases = json.loads((DATA / "sake" / "aliases.json").read_text(encoding="utf-8"))
    expected = [
        AliasPair(space, alias, aliases[space][alias])
        for space in ("concepts", "labels")
        for alias in sorted(aliases[space])
    ]
    assert pairs == expected
    assert pairs[0].space == "concepts" and pairs[-1].space == "labels"


@pytest.mark.parametrize("text", ['{"concepts": {"a": 1}}', '["a"]', '{"labels": []}'])
def test_aliases_of_another_shape_are_sent_as_read(tmp_path: Path, text: str) -> None:
    (tmp_path / "aliases.json").write_text(text, encoding="utf-8")
    read = read_context_folder(tmp_path)
    assert read.alias_pairs() is None
    (write,) = fill_writes(read, WIDE)
    assert isinstance(write, AliasesWrite)
    assert write.body() == json.loads(text)


def test_the_demo_folder_is_one_write_per_route_under_taguru_s_caps() -> None:
    read = read_context_folder(DATA / "sake")
    writes = fill_writes(read, WIDE)
    assert [write.kind for write in writes] == ["sources", "associations", "aliases"]
    assert writes[0].items == len(read.sources) == 7
    assert writes[1].body() == [association.item for association in read.associations]


def _source(index: int, text: str) -> MarkdownSource:
    return MarkdownSource(source=f"d/{index:04d}.md", text=text, file=Path(f"/f/{index}.md"))


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(max_size=300), min_size=1, max_size=40),
    max_items=st.integers(min_value=1, max_value=12),
    max_bytes=st.integers(min_value=40, max_value=4000),
)
def test_source_batches_keep_order_count_and_body_bytes(
    texts: list[str], max_items: int, max_bytes: int
) -> None:
    sources = [_source(index, text) for index, text in enumerate(texts)]
    for index, source in enumerate(sources):
        if index % 3 == 0:
            source.tags = ["t"]
            source.sections = [{"paragraph": 0, "section": "s"}]
        if index % 4 == 0:
            source.date = 1_700_000_000
    caps = Caps(sources=max_items, associations=1, alias_pairs=1, body_bytes=max_bytes)
    writes = source_writes(sources, Path("/f"), caps)
    assert [s for write in writes for s in write.sources] == sources
    for write in writes:
        assert 1 <= write.items <= max_items
        if write.items > 1:
            assert len(encode_json(write.body())) <= max_bytes


def test_association_batches_split_by_count_and_by_bytes() -> None:
    items = [
        Association(
            {"subject": f"s{i:02d}", "label": "l", "object": "o" * 50, "weight": 1.0}, i + 1
        )
        for i in range(25)
    ]
    by_count = association_writes(items, Path("a.jsonl"), Caps(1, 10, 1))
    assert [write.items for write in by_count] == [10, 10, 5]
    one = len(encode_json(items[0].item))
    by_bytes = association_writes(items, Path("a.jsonl"), Caps(1, 100, 1, body_bytes=3 * one + 5))
    assert [write.items for write in by_bytes] == [3] * 8 + [1]
    assert all(len(encode_json(write.body())) <= 3 * one + 5 for write in by_bytes)


def test_a_smaller_budget_splits_a_write_and_keeps_one_item_whole() -> None:
    sources = [_source(index, "x" * 100) for index in range(4)]
    (write,) = source_writes(sources, Path("/f"), WIDE)
    halves = split_write(write, Caps(1000, 1, 1, body_bytes=300))
    assert [part.items for part in halves] == [2, 2]
    (alone,) = split_write(SourcesWrite(tuple(sources[:1]), Path("/f")), Caps(1, 1, 1, 10))
    assert alone.items == 1


def test_a_source_refusal_names_the_file_and_the_line_of_its_item() -> None:
    read = read_context_folder(DATA / "sake")
    (write, *_rest) = fill_writes(read, WIDE)
    assert isinstance(write, SourcesWrite)
    brewery = next(s for s in write.sources if s.source == "corpus/brewery.md")
    where = write.where
    assert where("sections['corpus/brewery.md'][0].section", "") == Location(brewery.file, 2)
    assert where("tags['corpus/brewery.md'][1]", "") == Location(brewery.file, 3)
    assert where("dates['corpus/brewery.md']", "") == Location(brewery.file, 4)
    assert where("passages['corpus/brewery.md']", "") == Location(brewery.file)
    assert where("passages['elsewhere.md']", "") == Location(DATA / "sake")
    assert str(Location(brewery.file, 2)) == f"{brewery.file}:2"


def test_the_longest_source_id_a_path_names_wins() -> None:
    short = _source(1, "a")
    short.source = "a'b"
    long = _source(2, "b")
    long.source = "a'b']['c"
    long.tags, long.tags_line = ["t"], 7
    write = SourcesWrite((short, long), Path("/f"))
    assert write.where("tags['a'b']['c'][0]", "") == Location(long.file, 7)


def test_an_association_refusal_names_its_jsonl_line(tmp_path: Path) -> None:
    file = tmp_path / "associations.jsonl"
    items = [Association({"subject": "a"}, line) for line in (1, 3, 8)]
    write = AssociationsWrite(tuple(items), file)
    assert write.where("associations[2].weight", "") == Location(file, 8)
    assert write.where(None, "Failed to deserialize: [1].object: missing field") == Location(
        file, 3
    )
    assert write.where("associations", "expected an array") == Location(file)
    assert write.where("associations[9].weight", "") == Location(file)


def test_an_alias_refusal_names_the_binding_after_those_applied(tmp_path: Path) -> None:
    file = tmp_path / "aliases.json"
    file.write_text(
        '{\n  "concepts": {\n    "b": "B",\n    "a": "A"\n  },\n'
        '  "labels": {\n    "a": "L"\n  }\n}',
        encoding="utf-8",
    )
    pairs = read_context_folder(tmp_path).alias_pairs()
    assert pairs is not None
    write = AliasesWrite(tuple(pairs), file)
    # Applied in order: concepts a (line 4), concepts b (line 3), labels a (line 7).
    assert write.where(None, "applied 0 aliases, then …") == Location(file, 4)
    assert write.where(None, "applied 1 of 3 aliases, then: …") == Location(file, 3)
    assert write.where(None, "applied 2 aliases, then …") == Location(file, 7)
    assert write.where(None, "conflict") == Location(file)


def test_a_refusal_naming_no_item_of_a_one_item_request_names_that_item(tmp_path: Path) -> None:
    one = _source(1, "text")
    assert SourcesWrite((one,), tmp_path).where(None, "payload too large") == Location(one.file)
    two = SourcesWrite((one, _source(2, "more")), tmp_path)
    assert two.where(None, "payload too large") == Location(tmp_path)
    file = tmp_path / "associations.jsonl"
    alone = AssociationsWrite((Association({}, 5),), file)
    assert alone.where(None, "payload too large") == Location(file, 5)
