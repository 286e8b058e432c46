"""The long fuzz run, for nightly use: the properties of tests/bpe/test_fuzz.py with
many more examples each.

    python -m benchmarks.fuzz --examples 20000            # every property
    python -m benchmarks.fuzz --examples 5000 -k stream   # names containing "stream"

The properties and their input strategies live in tests/bpe/test_fuzz.py (arbitrary
bytes and Unicode on trained tokenizers; the fast trainer against the reference
on tie-heavy random tables; the fast encoder against the reference and
tiktoken's rule on random merge lists). This script only raises the example
count (through BEAM_BPE_FUZZ_EXAMPLES, read when pytest loads the test file) and
runs the properties through pytest, printing a line per property. Hypothesis
picks fresh random inputs each night and prints a reproducible failing example.
Exit status 1 if any property failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

PROPERTIES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "test_fuzz.py")


class _PerProperty:
    """A pytest plugin: keeps the hypothesis properties whose names contain the
    keyword, and prints one line per property (and the failure, when one fails)."""

    def __init__(self, keyword: str, examples: int):
        self.keyword = keyword
        self.examples = examples
        self.ran: list[str] = []
        self.failed: list[str] = []

    def pytest_collection_modifyitems(self, config, items):
        kept = [item for item in items
                if hasattr(getattr(item, "obj", None), "hypothesis") and self.keyword in item.name]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                status = "ok"
            elif report.skipped:
                status = f"skipped ({report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr})"
            else:  # a property failed: show hypothesis' minimal example, go on
                print(report.longreprtext, file=sys.stderr)
                status = "FAILED"
                self.failed.append(report.head_line)
            self.ran.append(report.head_line)
            print(f"{report.head_line:<70} {self.examples:>7} examples  {report.duration:7.1f} s  {status}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20000, help="examples per property")
    parser.add_argument("-k", dest="keyword", default="", help="run only properties whose name contains this")
    args = parser.parse_args(argv)

    # Must be set before pytest loads the test file: it reads it in its decorators.
    os.environ["BEAM_BPE_FUZZ_EXAMPLES"] = str(args.examples)
    import pytest

    plugin = _PerProperty(args.keyword, args.examples)
    total_start = time.perf_counter()
    code = pytest.main([PROPERTIES, "-p", "no:cacheprovider", "-p", "no:terminal"], plugins=[plugin])
    held = len(plugin.ran) - len(plugin.failed)
    print(f"{held}/{len(plugin.ran)} properties held, {time.perf_counter() - total_start:.0f} s")
    return 1 if plugin.failed or code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) else 0


if __name__ == "__main__":
    sys.exit(main())
