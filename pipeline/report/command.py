"""``beam-bpe report``: how well one or more tokenizers fit a corpus -> report.json + index.html.

    beam-bpe report --tokenizer tok/ [--tokenizer other/] [--tokenizer r.tiktoken --tokenizer-preset NAME] \
        --input 'corpus/*.jsonl.gz' --output report/ [--sample-documents N] [--source-field F] [Beam pipeline options]

A Beam job reads the corpus with the reader of train and encode (bad records
go to ``DIR/dead_letters/``), measures every document with every tokenizer
(``transforms.report.MeasureTokenizers``) and writes the measures into
``DIR/.staging/`` (``pipeline.report.measures``); the driver puts them together
and turns them into the page ``DIR/index.html`` (``pipeline.report.page``), one
self-contained file that works offline, and ``DIR/report.json``
(``pipeline.report.json_report``).
The output follows the job-output contract of ``pipeline.command_machinery.outputs``: report.json
is written last and marks the directory complete.
"""

from __future__ import annotations

import argparse
import sys

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bpe import proof_cache
from bpe.tokenizer import Tokenizer
from pipeline import runtime
from pipeline.command_machinery import outputs, progress, tokenizer_flags, unreadable_records
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.runners import describe_runner, pipeline_options
from pipeline.report.json_report import build_report
from pipeline.report.measures import read_measures, write_measures
from pipeline.report.page import CHECK_TEXTS, live_pattern, render_page
from transforms.dead_letters import WriteDeadLetters
from transforms.read import FORMATS, ReadDocuments, match_inputs
from transforms.report import MeasureTokenizers, combine_measures

REPORT_FILE = "report.json"
PAGE_FILE = "index.html"
# What the job leaves besides report.json, the completion marker.
RESULTS = (PAGE_FILE, f"{outputs.DEAD_LETTERS_DIR}/{outputs.DEAD_LETTER_GLOB}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    tokenizer_flags.add_several_arguments(parser)
    parser.add_argument("--input", required=True, action="append", help="input glob (repeatable)")
    parser.add_argument("--output", required=True, help="directory for report.json, index.html and dead_letters/")
    parser.add_argument("--format", default="auto", help=f"input format: {', '.join(FORMATS)} (default auto)")
    parser.add_argument("--text-field", default="text", help="jsonl key / Parquet column of the text")
    parser.add_argument(
        "--source-field", default=None,
        help="jsonl key / Parquet column naming each document's source (default: its input file)",
    )
    parser.add_argument(
        "--sample-documents", type=int, default=200,
        help="documents in the sample (their first 4 KB) segmented three ways and shown in the "
        "visualizer (default 200)",
    )
    parser.add_argument(
        "--rare-below", type=int, default=10,
        help="list the tokens produced fewer than this many times (default 10)",
    )
    progress.add_arguments(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    options = pipeline_options(beam_args)
    args.input = [outputs.absolute(pattern) for pattern in args.input]
    args.output = outputs.absolute(args.output)
    tokenizer_paths = [outputs.absolute(path) for path in args.tokenizer]
    output = outputs.StagedOutput(args.output, RESULTS, marker=REPORT_FILE, command="report")
    presets, tokenizers = map(list, zip(*_check_arguments(args, tokenizer_paths)))
    # Which engine gives each tokenizer's IDs is proven here, once (O(vocabulary)), or read from the proof cache.
    proofs = [proof_cache.proven(tokenizer) for tokenizer in tokenizers]
    staging = output.staging
    output.clear_leftovers()

    p = runtime.new_pipeline(options)
    read = p | "Read" >> ReadDocuments(
        args.input, format=args.format, text_field=args.text_field, id_field=args.source_field
    )
    measures = read.documents | "Measure" >> MeasureTokenizers(
        tokenizer_paths, tokenizer_presets=presets, proofs=proofs, source_field=args.source_field,
        sample_documents=args.sample_documents, vocab_sizes=[t.vocab_size for t in tokenizers],
        check_texts=CHECK_TEXTS, per_tokenizer=live_pattern,
    )
    for name, pieces in measures.items():
        _ = pieces | f"WriteMeasures/{name}" >> beam.Map(write_measures, staging)
    _ = read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(staging)
    progress.Progress("report", "measure", files=args.files, enabled=not args.no_progress,
                      every=args.progress_every).run(p)

    # The page's patterns come translated by the job's workers (see MeasureTokenizers' per_tokenizer).
    measures = combine_measures(read_measures(staging), tokenizers, CHECK_TEXTS, live_pattern)
    patterns = measures["per_tokenizer"]
    dead_letters = len(unreadable_records.read_dead_letters(staging))
    report = build_report(measures, tokenizers, tokenizer_paths, args.input, dead_letters, args.rare_below)
    page = render_page(report, tokenizers, measures["checks"], patterns)
    outputs.write_atomic(FileSystems.join(staging, PAGE_FILE), page)
    output.publish(report)
    corpus = report["corpus"]
    summary = ", ".join(
        f"{t['name']} {t['total']['bytes_per_token'] or 0:.2f} bytes/token" for t in report["tokenizers"]
    )
    print(
        f"beam-bpe report: {corpus['documents']:,} documents ({corpus['bytes']:,} bytes, {corpus['sources']:,} sources), "
        f"{corpus['dead_letters']:,} dead letters; {summary} ({describe_runner(options)})\n"
        f"  report: {FileSystems.join(args.output, REPORT_FILE)}\n"
        f"  page:   {FileSystems.join(args.output, PAGE_FILE)}",
        file=sys.stderr,
    )
    return 0


def _check_arguments(args: argparse.Namespace, paths: list[str]) -> list[tuple[str | None, Tokenizer]]:
    """Fails before the job on any user mistake; returns each tokenizer with its preset."""
    if args.format not in FORMATS:
        raise UserError(f"unknown --format {args.format!r} (choose from {', '.join(FORMATS)})")
    if args.sample_documents < 0:
        raise UserError(f"--sample-documents must be 0 or more, not {args.sample_documents}")
    if args.rare_below < 1:
        raise UserError(f"--rare-below must be 1 or more, not {args.rare_below}")
    if args.source_field is not None and args.format == "text":
        raise UserError("--source-field needs jsonl or parquet input (text lines have no fields)")
    progress.check_arguments(args)
    tokenizers = tokenizer_flags.load_several(args, paths)
    try:
        files = match_inputs(args.input)
    except FileNotFoundError as e:
        raise UserError(str(e)) from None
    outputs.claim(args.output, "report", inputs=files)
    args.files = len(files)  # for the progress
    return tokenizers

