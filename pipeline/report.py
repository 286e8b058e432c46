"""``beam-bpe report``: how well one or more tokenizers fit a corpus -> report.json + index.html.

    beam-bpe report --tokenizer tok/ [--tokenizer other/] --input 'corpus/*.jsonl.gz' \
        --output report/ [--sample-documents N] [--source-field F] [Beam pipeline options]

A Beam job reads the corpus with the reader of train and encode (bad records
go to ``DIR/dead_letters/``), measures every document with every tokenizer
(``transforms.report.MeasureTokenizers``) and writes the measures into
``DIR/.staging/``; the driver turns them into ``DIR/report.json``
(``pipeline.report_json``) and the page ``DIR/index.html``
(``pipeline.report_page``), one self-contained file that works offline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from bpe.tokenizer import Tokenizer, TokenizerFileError
from pipeline.errors import UserError
from pipeline.report_json import build_report
from pipeline.report_page import render_page
from pipeline.runners import describe_runner, new_pipeline, pipeline_options
from transforms.dead_letters import WriteDeadLetters
from transforms.read import FORMATS, ReadDocuments, match_inputs
from transforms.report import MeasureTokenizers

REPORT_FILE = "report.json"
PAGE_FILE = "index.html"
STAGING_DIR = ".staging"
MEASURES = "measures"  # the job's one output file, DIR/.staging/measures.json
DEAD_LETTERS_DIR = "dead_letters"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokenizer", required=True, action="append",
        help="tokenizer.json, or a directory holding it (repeat to compare several side by side)",
    )
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
        help="documents in the sample (their first 8 KB) segmented three ways and shown in the "
        "visualizer (default 200)",
    )
    parser.add_argument(
        "--rare-below", type=int, default=10,
        help="list the tokens produced fewer than this many times (default 10)",
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    _refuse_unknown_flags(beam_args)
    options = pipeline_options(beam_args)
    args.input = [_absolute(pattern) for pattern in args.input]
    args.output = _absolute(args.output)
    tokenizer_paths = [_absolute(path) for path in args.tokenizer]
    tokenizers = _check_arguments(args, tokenizer_paths)
    # The proof that tiktoken gives our IDs is O(vocabulary): once here, not per worker.
    proven = [tokenizer.fast_encoder()[0] is not None for tokenizer in tokenizers]
    staging = FileSystems.join(args.output, STAGING_DIR)
    prepare_output(args.output)

    with new_pipeline(options) as p:
        read = p | "Read" >> ReadDocuments(
            args.input, format=args.format, text_field=args.text_field, id_field=args.source_field
        )
        measures = read.documents | "Measure" >> MeasureTokenizers(
            tokenizer_paths, tiktoken_proven=proven, source_field=args.source_field,
            sample_documents=args.sample_documents,
        )
        _ = (
            measures
            | "ToJson" >> beam.Map(lambda value: json.dumps(value, separators=(",", ":")))
            | "WriteMeasures" >> beam.io.WriteToText(
                FileSystems.join(staging, MEASURES), file_name_suffix=".json", num_shards=1, shard_name_template=""
            )
        )
        _ = read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(args.output)

    measures = read_measures(staging)
    report = build_report(
        measures, tokenizers, tokenizer_paths, args.input, count_dead_letters(args.output), args.rare_below
    )
    page = render_page(report, tokenizers)
    publish(args.output, report, page)
    corpus = report["corpus"]
    summary = ", ".join(
        f"{t['name']} {t['total']['bytes_per_token'] or 0:.2f} bytes/token" for t in report["tokenizers"]
    )
    print(
        f"beam-bpe report: {corpus['documents']} documents ({corpus['bytes']} bytes, {corpus['sources']} sources), "
        f"{corpus['dead_letters']} dead letters; {summary} ({describe_runner(options)})\n"
        f"  report: {FileSystems.join(args.output, REPORT_FILE)}\n"
        f"  page:   {FileSystems.join(args.output, PAGE_FILE)}",
        file=sys.stderr,
    )
    return 0


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def _refuse_unknown_flags(beam_args: list[str]) -> None:
    """Flags that are neither ours nor Beam's are an error, not silently ignored."""
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    todo, seen = list(PipelineOptions.__subclasses__()), set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        try:
            cls._add_argparse_args(parser)
        except argparse.ArgumentError:  # an option two classes define: known either way
            pass
    _, unknown = parser.parse_known_args(beam_args)
    if unknown:
        raise UserError(f"unknown argument {unknown[0]} (neither a report flag nor a Beam pipeline option)")


def _check_arguments(args: argparse.Namespace, paths: list[str]) -> list[Tokenizer]:
    """Fails before the job on any user mistake; returns the tokenizers."""
    if args.format not in FORMATS:
        raise UserError(f"unknown --format {args.format!r} (choose from {', '.join(FORMATS)})")
    if args.sample_documents < 0:
        raise UserError(f"--sample-documents must be 0 or more, not {args.sample_documents}")
    if args.rare_below < 1:
        raise UserError(f"--rare-below must be 1 or more, not {args.rare_below}")
    if args.source_field is not None and args.format == "text":
        raise UserError("--source-field needs jsonl or parquet input (text lines have no fields)")
    tokenizers = []
    for path in paths:
        try:
            tokenizers.append(Tokenizer.load(path))
        except TokenizerFileError as e:
            raise UserError(str(e)) from None
    try:
        match_inputs(args.input)
    except FileNotFoundError as e:
        raise UserError(str(e)) from None
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UserError(f"--output {args.output} exists and is not a directory")
    return tokenizers


def read_measures(staging: str) -> dict:
    """The job's measures (one JSON line, written by Beam's file sink)."""
    path = FileSystems.join(staging, MEASURES + ".json")
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return json.loads(f.read())


def count_dead_letters(output_dir: str) -> int:
    pattern = FileSystems.join(output_dir, DEAD_LETTERS_DIR, "dead_letters-*-of-*.jsonl")
    total = 0
    for m in FileSystems.match([pattern])[0].metadata_list:
        with FileSystems.open(m.path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            total += sum(1 for line in f if line.strip())
    return total


# --- output handling: replaced by pipeline/outputs.py at merge -------------------------------

def prepare_output(output_dir: str) -> None:
    """Removes what an earlier run left that this one rewrites: staging and dead-letter files."""
    shutil.rmtree(os.path.join(output_dir, STAGING_DIR), ignore_errors=True)
    shutil.rmtree(os.path.join(output_dir, DEAD_LETTERS_DIR), ignore_errors=True)
    os.makedirs(output_dir, exist_ok=True)


def _write_atomically(path: str, text: str) -> None:
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def publish(output_dir: str, report: dict, page: str) -> None:
    """Writes report.json, then index.html, each atomically (a temporary file, then a rename)."""
    _write_atomically(os.path.join(output_dir, REPORT_FILE), json.dumps(report, separators=(",", ":")) + "\n")
    _write_atomically(os.path.join(output_dir, PAGE_FILE), page)
    shutil.rmtree(os.path.join(output_dir, STAGING_DIR), ignore_errors=True)

# --- end of output handling -------------------------------------------------------------------
