"""The memory settings of a process that packs, made once, by the first step that reads or
writes tokens (spilling a unit, writing an output file or a part).

A packing worker reads, spills and writes one unit, part or output file after
another, each a few MiB of arrays, so its peak should be that of one of them
however many it handles (``benchmarks/RESULTS.md``, 2026-12-03):

- Arrow allocates from its jemalloc pool, which gives freed memory back to the
  system sooner than its default.
- glibc's malloc gets fixed thresholds: every allocation of 128 KiB or more is
  mapped on its own and unmapped when freed, and free memory at the top of the
  heap is given back past 128 KiB. By default glibc raises both thresholds each
  time a large block is freed, after which such blocks come from the heap and
  leave it fragmented: the peak of a worker writing Megatron's parts grew by
  about 1 MiB with each part.

Made earlier, in the pass over the ids, they raised the workers' peaks with
Parquet output by 5-8 MiB, as measured. Elsewhere (another
allocator, an Arrow built without jemalloc) the settings that do not apply are
left as they are.
"""

from __future__ import annotations

import ctypes
import functools

import pyarrow as pa

__all__ = ["MALLOC_THRESHOLD", "bound_worker_memory"]

MALLOC_THRESHOLD = 128 << 10  # glibc's own starting value of both thresholds
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


@functools.cache
def bound_worker_memory() -> None:
    """Sets this process's allocators for packing (see the module docstring); once per process."""
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # an Arrow built without jemalloc
        pass
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt(_M_MMAP_THRESHOLD, MALLOC_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, MALLOC_THRESHOLD)
