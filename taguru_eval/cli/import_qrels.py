"""``python -m taguru_eval import-qrels``: TREC qrels and topics, or a BEIR folder, in.

The logic is :mod:`taguru_eval.inputs.qrels`; this module parses the flags,
writes a BEIR folder's documents as a context folder (staged and renamed into
place, :func:`taguru_eval.corpus.documents.write_context_folder`), then the
eval.jsonl and the report as one set (all or none, as ``import-golden``
writes its files), and prints where every query and judgment went.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from taguru_eval._base.text import one_line
from taguru_eval.cli.flags import run_subcommand, scan_flags, write_reports
from taguru_eval.corpus.documents import write_context_folder
from taguru_eval.errors import EXIT_OK, PREFIX, InputError, RunError, UsageError, os_error_text
from taguru_eval.inputs.outputs import refuse_overlaps
from taguru_eval.inputs.qrels import (
    BEIR_SPLIT,
    IRDS_PREFIX,
    QrelsImport,
    QrelsOptions,
    import_beir,
    import_irds,
    import_trec,
    report_text,
)

HELP: Final = """\
usage: python -m taguru_eval import-qrels QRELS --topics FILE [--topic-field F]
           [--source-template T] [--eval-out FILE] [--report-out FILE] [--name N]
       python -m taguru_eval import-qrels BEIR_DIR [--split S] [--corpus-out DIR]
           [--eval-out FILE] [--report-out FILE] [--name N]
       python -m taguru_eval import-qrels irds:ID [--topic-field F]
           [--source-template T] [--corpus-out DIR] [--eval-out FILE]
           [--report-out FILE] [--name N]

Import relevance judgments as an eval set: each judged query becomes a case
(case_id = the query id, query = its text), its judged documents the case's
expected_sources with their grades as relevance (1..3; a grade of 0 or below
is not carried, a grade above 3 is an error).

TREC: QRELS holds 'qid 0 docno grade' lines; --topics is a <top> SGML file, a
TREC XML <topics> file, or TSV 'qid<TAB>query' lines. Fields are
percent-decoded, and a docno 'source#3' (or 'source#2+5', 'source#*', as
export --trec writes them) names paragraphs of a source; any other docno is
a whole source, through --source-template.

BEIR: BEIR_DIR holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv. The
documents are also written as a context folder (one source per document,
docs/<id>.md, its title the first paragraph), for 'serve' to host and 'load'
to put into a taguru; judgments of documents the corpus lacks are dropped.

irds:ID: a dataset of ir_datasets (the 'ir' extra), read as ir_datasets reads
it: its queries (default_text(), or --topic-field) and qrels, and, when it has
documents, those written as a BEIR folder's are (else --source-template).

The report (JSON) lists every query not imported and every judgment not
carried, with why.

options:
  --topics FILE           TREC topics file (required with QRELS)
  --topic-field F         the <top>/<topic> field (or irds query field) holding
                          the query (default: title, else query; irds: its
                          default_text())
  --source-template T     TREC, irds without documents: source id of a docno,
                          '{}' is the docno (default: {})
  --split S               BEIR: the qrels split to read (default: test)
  --corpus-out DIR        BEIR, irds: the context folder to write; it must not
                          exist or be empty, and is named after its last part
                          (default: <BEIR_DIR>.contexts/<name of BEIR_DIR>;
                          irds: <ID, '/' as '-'>.contexts/<same>)
  --eval-out FILE         eval.jsonl to write (default: <QRELS stem, BEIR_DIR
                          or ID>.eval.jsonl)
  --report-out FILE       import report (default: <QRELS stem, BEIR_DIR or
                          ID>.import-report.json)
  --name N                the eval set's header name (default: the QRELS stem,
                          BEIR_DIR's name or the ID, '/' as '-')
  -h, --help              print this help and exit

exit codes: 0 imported; 1 a file could not be written, or ir_datasets failed;
2 usage error, unreadable or malformed input, a missing 'ir' extra, or no
query left to import
"""

_VALUE_FLAGS: Final = {
    flag: f"{flag} needs a value"
    for flag in (
        "--topics",
        "--topic-field",
        "--source-template",
        "--split",
        "--corpus-out",
        "--eval-out",
        "--report-out",
        "--name",
    )
}
_NOT_FOR: Final = {
    "a BEIR folder": ("--topics", "--topic-field", "--source-template"),
    "a TREC qrels file": ("--split", "--corpus-out"),
    "an irds: id": ("--topics", "--split"),
}


@dataclass(frozen=True)
class QrelsArgs:
    source: str
    """QRELS (TREC), BEIR_DIR, or irds:ID."""
    beir: bool
    irds: str | None
    """The ir_datasets id of an ``irds:`` source."""
    topics: str | None
    eval_out: str
    report_out: str
    corpus_out: str | None
    options: QrelsOptions


def parse_args(argv: Sequence[str]) -> QrelsArgs | None:
    """The command line; ``None`` means help. Raises :class:`UsageError`."""
    flags = scan_flags(argv, _VALUE_FLAGS, (), "import-qrels")
    if flags is None:
        return None
    values, positionals = flags.values, flags.positionals
    if len(positionals) != 1:
        raise UsageError(
            f"import-qrels takes one QRELS file or BEIR folder (got {len(positionals)})"
        )
    source = positionals[0]
    irds = source.removeprefix(IRDS_PREFIX) if source.startswith(IRDS_PREFIX) else None
    beir = irds is None and Path(source).is_dir()
    kind = "an irds: id" if irds is not None else "a BEIR folder" if beir else "a TREC qrels file"
    for flag in _NOT_FOR[kind]:
        if flag in values:
            raise UsageError(f"{flag} does not apply to {kind} ('{source}')")
    if irds == "":
        raise UsageError("irds: needs a dataset id, e.g. irds:beir/scifact/test")
    if kind == "a TREC qrels file" and "--topics" not in values:
        raise UsageError(
            f"'{source}' is a qrels file: --topics FILE is required (or give a BEIR folder)",
        )
    path = Path(source)
    name = irds.replace("/", "-") if irds is not None else path.name or path.resolve().name
    stem = (
        name if irds is not None else str(path.parent / name) if beir else str(path.with_suffix(""))
    )
    corpus_out = None
    if beir or irds is not None:
        parent = Path() if irds is not None else path.parent
        corpus_out = values.get("--corpus-out", str(parent / f"{name}.contexts" / name))
        target = Path(corpus_out)
        if not target.name:
            raise UsageError("--corpus-out needs a folder path, not an empty one")
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise UsageError(
                f"--corpus-out '{corpus_out}' already exists and is not an empty folder",
                hint="remove it, or name a new folder with --corpus-out",
            )
    outputs = {
        "--eval-out": values.get("--eval-out", f"{stem}.eval.jsonl"),
        "--report-out": values.get("--report-out", f"{stem}.import-report.json"),
    }
    inputs = (
        {"QRELS": source, "--topics": values["--topics"]} if kind == "a TREC qrels file" else {}
    )
    refuse_overlaps(inputs, outputs)
    return QrelsArgs(
        source=source,
        beir=beir,
        irds=irds,
        topics=values.get("--topics"),
        eval_out=outputs["--eval-out"],
        report_out=outputs["--report-out"],
        corpus_out=corpus_out,
        options=QrelsOptions(
            name=values.get("--name", None if kind == "a TREC qrels file" else name),
            source_template=values.get("--source-template", "{}"),
            topic_field=values.get("--topic-field"),
            split=values.get("--split", BEIR_SPLIT),
        ),
    )


def _import(args: QrelsArgs) -> QrelsImport:
    if args.irds is not None:
        return import_irds(args.irds, args.options)
    if args.beir:
        return import_beir(args.source, args.options)
    assert args.topics is not None  # parse_args requires it
    return import_trec(args.source, args.topics, args.options)


def _summary(args: QrelsArgs, imported: QrelsImport) -> list[str]:
    report = imported.report
    counts = report["counts"]
    shown = (
        f"{args.source} (BEIR, split {args.options.split})"
        if args.beir
        else args.source
        if args.irds is not None
        else f"{args.source} and {args.topics}"
    )
    lines = [
        f"import-qrels: {counts['queries']} query(ies), {counts['judgments']} judgment(s) from "
        f"{shown} — {counts['cases']} case(s) to eval.jsonl, carrying "
        f"{counts['judgments_carried']} judgment(s)"
    ]
    for why, count in report["queries_dropped_by_reason"].items():
        lines.append(f"  {count} query(ies) not imported: {why}")
    for dropped in report["judgments_dropped"]:
        lines.append(f"  {dropped['count']} judgment(s) not carried: {dropped['why']}")
    if imported.documents is not None:
        skipped = report["documents_not_written"]
        if skipped:
            lines.append(f"  {len(skipped)} document(s) not written: see the report")
    return lines


def run_import(args: QrelsArgs, out: TextIO, err: TextIO) -> int:
    imported = _import(args)
    report = imported.report
    if imported.eval_text is None:
        reasons = "; ".join(
            f"{count} {why}" for why, count in report["queries_dropped_by_reason"].items()
        )
        raise InputError(
            f"{args.source}: no query became a case ({reasons or 'no query'}); nothing written",
            path=args.source,
            hint="check that the qrels and the queries name the same ids"
            + (" and that --split names the right qrels file" if args.beir else ""),
        )
    corpus = Path(args.corpus_out) if imported.documents is not None and args.corpus_out else None
    report["written"] = {"eval": args.eval_out, "corpus": None if corpus is None else str(corpus)}
    lines = _summary(args, imported)
    if corpus is not None and imported.documents is not None:
        description = (
            f"imported from the ir_datasets dataset {args.irds}"
            if args.irds is not None
            else f"imported from the BEIR folder {Path(args.source).name}"
        )
        try:
            corpus.parent.mkdir(parents=True, exist_ok=True)
            if corpus.is_dir():
                corpus.rmdir()  # empty (checked); the staged folder is renamed over it
            write_context_folder(corpus, {"description": description}, imported.documents)
        except OSError as exc:
            raise RunError(f"writing {corpus}: {os_error_text(exc)}") from None
    try:
        write_reports([(args.eval_out, imported.eval_text), (args.report_out, report_text(report))])
    except RunError:
        if corpus is not None:
            shutil.rmtree(corpus, ignore_errors=True)  # the set or nothing
        raise
    lines.append(f"  wrote {args.eval_out}")
    if corpus is not None and imported.documents is not None:
        lines.append(
            f"  wrote {corpus} ({len(imported.documents)} source(s)), context '{corpus.name}': "
            f"serve it with 'python -m taguru_eval serve {corpus.parent}', or load it into a "
            f"taguru with 'python -m taguru_eval load {corpus} --url URL'"
        )
    lines.append(f"  report: {args.report_out}")
    out.write("".join(f"{one_line(line)}\n" for line in lines))
    for warning in report["warnings"]:
        err.write(f"{one_line(f'{PREFIX}import-qrels: {warning}')}\n")
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``python -m taguru_eval import-qrels …``; returns the exit code."""
    return run_subcommand(
        "import-qrels", argv, parse_args, run_import, HELP, stdout=stdout, stderr=stderr
    )
