"""The long fuzz run, for nightly use: the properties of tests/test_fuzz.py with
many more examples each.

    python -m benchmarks.fuzz --examples 20000            # every property
    python -m benchmarks.fuzz --examples 5000 -k stream   # names containing "stream"

The properties and their input strategies live in tests/test_fuzz.py (arbitrary
bytes and Unicode on trained tokenizers; the fast trainer against the reference
on tie-heavy random tables; the fast encoder against the reference and
tiktoken's rule on random merge lists). This script only raises the example
count (through BEAM_BPE_FUZZ_EXAMPLES, read when the test module is imported)
and runs them one by one, printing a line per property. Hypothesis picks fresh
random inputs each night and prints a reproducible failing example. Exit status
1 if any property failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20000, help="examples per property")
    parser.add_argument("-k", dest="keyword", default="", help="run only properties whose name contains this")
    args = parser.parse_args(argv)

    # Must be set before the import: the test module reads it in its decorators.
    os.environ["BEAM_BPE_FUZZ_EXAMPLES"] = str(args.examples)
    import pytest

    from tests import test_fuzz

    properties = [
        (name, fn)
        for name, fn in vars(test_fuzz).items()
        if name.startswith("test_") and hasattr(fn, "hypothesis") and args.keyword in name
    ]
    failed = []
    total_start = time.perf_counter()
    for name, fn in properties:
        start = time.perf_counter()
        try:
            fn()
            status = "ok"
        except pytest.skip.Exception as e:
            status = f"skipped ({e})"
        except Exception:  # a property failed: show hypothesis' minimal example, go on
            traceback.print_exc()
            status = "FAILED"
            failed.append(name)
        print(f"{name:<70} {args.examples:>7} examples  {time.perf_counter() - start:7.1f} s  {status}", flush=True)
    print(f"{len(properties) - len(failed)}/{len(properties)} properties held, {time.perf_counter() - total_start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
