"""prepare_run: EVALUATE.md §2.3 steps 2–6, in order, with no network."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from taguru_eval.errors import InputError
from taguru_eval.inputs.config import ConfigError
from taguru_eval.inputs.prepare import PreparedRun, prepare_run
from taguru_eval.options import RunOptions

GOOD = (
    '{"taguru_eval":1,"name":"n"}\n'
    '{"case_id":"c1","query":"q","options":{"tags":["t"]}}\n'
    '{"case_id":"c2","query":"q"}\n'
    '{"case_id":"c3","query":"q","options":{"since":0}}\n'
    '{"case_id":"c4","query":"q","options":{"until":5,"tags":[]}}\n'
)
ASSEMBLY_WARNING = (
    "case '{}': options.tags/since/until are not applied under --assembly "
    "(POST /contexts/{{name}}/evidence has no such request fields)"
)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {
        "good": GOOD,
        "bad_eval": '{"taguru_eval":1}\n{"case_id":"c1"}\n',
        "bad_limit": '{"taguru_eval":1}\n{"case_id":"c1","query":"q","options":{"limit":1001}}\n',
        "thresholds": '{"taguru_evaluate_thresholds":1,"cases":{"overrides":{"c2":{}}}}',
        "bad_thresholds": '{"taguru_evaluate_thresholds":1,"bogus":1}',
        "unknown_case_thresholds": (
            '{"taguru_evaluate_thresholds":1,"cases":{"overrides":{"zz":{}}}}'
        ),
        "config": "TAGURU_ADDR=0.0.0.0:7000\nTAGURU_API_TOKENS=ci:s3cret-token\n",
        "bad_config": "NOEQUALS\n",
    }
    out = {}
    for name, text in paths.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        out[name] = str(path)
    return out


def options(files: dict[str, str], **overrides: object) -> RunOptions:
    fields: dict[str, object] = {"eval_path": files["good"], "context": "sake", "url": "http://h:9"}
    fields.update(overrides)
    return RunOptions(**fields)  # type: ignore[arg-type]


def prepare(opts: RunOptions, env: dict[str, str] | None = None) -> tuple[PreparedRun, list[str]]:
    lines: list[str] = []
    prepared = prepare_run(opts, {} if env is None else env, stderr=lines.append)
    return prepared, lines


def test_baseline_prepares_without_warnings(files: dict[str, str]) -> None:
    prepared, lines = prepare(options(files))
    assert lines == []
    assert prepared.warnings == ()
    assert prepared.eval_set.name == "n"
    assert prepared.eval_set.case_ids == ["c1", "c2", "c3", "c4"]
    assert (prepared.base_url, prepared.masked_url) == ("http://h:9", "http://h:9")
    assert prepared.thresholds is None and prepared.token is None


def test_assembly_warnings_printed_and_recorded(files: dict[str, str]) -> None:
    prepared, lines = prepare(options(files, assembly=True))
    texts = [ASSEMBLY_WARNING.format(case_id) for case_id in ("c1", "c3", "c4")]
    assert prepared.warnings == tuple(texts)
    assert lines == [f"taguru: evaluate: {text}" for text in texts]


def test_eval_error_comes_first(files: dict[str, str]) -> None:
    opts = options(
        files, eval_path=files["bad_eval"], thresholds=files["bad_thresholds"],
        config=files["bad_config"], url="not a url",
    )  # fmt: skip
    with pytest.raises(InputError, match="missing field `query`"):
        prepare(opts)


def test_limit_error_before_thresholds(files: dict[str, str]) -> None:
    opts = options(files, eval_path=files["bad_limit"], thresholds=files["bad_thresholds"])
    with pytest.raises(InputError) as caught:
        prepare(opts)
    assert caught.value.message == (
        f"{files['bad_limit']}: line 2: case 'c1': options.limit: must be 1..=1000, got 1001"
    )


def test_assembly_warnings_then_thresholds_error(files: dict[str, str]) -> None:
    lines: list[str] = []
    opts = options(files, assembly=True, thresholds=files["bad_thresholds"], url="not a url")
    with pytest.raises(InputError) as info:
        prepare_run(opts, {}, stderr=lines.append)
    assert "bogus" in str(info.value)
    assert str(info.value).startswith(files["bad_thresholds"])
    assert len(lines) == 3  # printed before the later failure


def test_thresholds_checked_against_case_ids(files: dict[str, str]) -> None:
    with pytest.raises(InputError, match="zz"):
        prepare(options(files, thresholds=files["unknown_case_thresholds"]))
    prepared, _ = prepare(options(files, thresholds=files["thresholds"]))
    assert prepared.thresholds is not None
    raw = Path(files["thresholds"]).read_bytes()
    assert prepared.thresholds.sha256 == hashlib.sha256(raw).hexdigest()


def test_thresholds_error_before_config_error(files: dict[str, str]) -> None:
    opts = options(files, thresholds=files["bad_thresholds"], config=files["bad_config"])
    with pytest.raises(InputError, match="bogus"):
        prepare(opts)


def test_config_error_before_url_error(files: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        prepare(options(files, config=files["bad_config"], url="not a url"))
    with pytest.raises(ConfigError):
        prepare(options(files, url="not a url"), {"TAGURU_CONFIG": files["bad_config"]})


def test_config_supplies_addr_and_token_without_mutating_env(files: dict[str, str]) -> None:
    env = {"PATH": "/bin"}
    prepared, lines = prepare(options(files, url=None, config=files["config"]), env)
    assert env == {"PATH": "/bin"}
    assert lines == []
    assert prepared.base_url == "http://127.0.0.1:7000"
    assert prepared.token == "s3cret-token"
    assert "s3cret-token" not in repr(prepared)


def test_environment_beats_config_file(files: dict[str, str]) -> None:
    env = {"TAGURU_ADDR": "h:1", "TAGURU_CONFIG": files["config"]}
    prepared, lines = prepare(options(files, url=None), env)
    assert prepared.base_url == "http://h:1"
    assert lines == [
        "taguru: config: TAGURU_ADDR set in the environment; the file value is ignored"
    ]


@pytest.mark.parametrize(
    ("url", "env", "fragment"),
    [
        ("http://u:p@h", {}, "must not carry credentials"),
        ("not a url", {}, "could not be parsed as a URL"),
        (None, {"TAGURU_ADDR": "0.0.0.0:0"}, "binds to port 0"),
    ],
)
def test_url_refusals(
    files: dict[str, str], url: str | None, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(InputError, match=fragment) as info:
        prepare(options(files, url=url), env)
    assert info.value.exit_code == 2


def test_the_must_refuse_file_is_checked_before_the_thresholds_file(
    files: dict[str, str], tmp_path: Path
) -> None:
    clash = tmp_path / "mr.jsonl"
    clash.write_text('{"taguru_eval_must_refuse":1}\n{"case_id":"c2","query":"q"}\n', "utf-8")
    opts = options(files, must_refuse=str(clash), thresholds=files["bad_thresholds"])
    with pytest.raises(InputError, match=r"line 2: case_id 'c2' is also an eval\.jsonl") as info:
        prepare(opts)
    assert info.value.exit_code == 2
    assert (info.value.line, info.value.field) == (2, "case_id")
