"""The allocator settings of a packing worker (transforms/pack/worker_memory.py)."""

import pyarrow as pa

from transforms.pack import worker_memory


class _FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, parameter, value):
        self.calls.append((parameter, value))
        return 1


def test_glibc_gets_fixed_thresholds_and_arrow_its_jemalloc_pool_once(monkeypatch):
    libc = _FakeLibc()
    monkeypatch.setattr(worker_memory.ctypes, "CDLL", lambda name: libc)
    worker_memory.bound_worker_memory.cache_clear()
    try:
        worker_memory.bound_worker_memory()
        worker_memory.bound_worker_memory()
    finally:
        worker_memory.bound_worker_memory.cache_clear()
    # M_MMAP_THRESHOLD (-3) and M_TRIM_THRESHOLD (-1), each once: fixed values, so glibc stops raising them.
    assert sorted(libc.calls) == [(-3, 128 << 10), (-1, 128 << 10)]
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return
    assert pa.default_memory_pool().backend_name == "jemalloc"


def test_without_glibc_nothing_fails(monkeypatch):
    class _NoMallopt:
        pass

    monkeypatch.setattr(worker_memory.ctypes, "CDLL", lambda name: _NoMallopt())
    worker_memory.bound_worker_memory.cache_clear()
    try:
        worker_memory.bound_worker_memory()
    finally:
        worker_memory.bound_worker_memory.cache_clear()
