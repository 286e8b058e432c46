"""The training loaders' own readers, imported without PyTorch: megatron-core's
``IndexedDataset`` and mosaicml-streaming's ``StreamingDataset``.

Both packages import ``torch`` at module level, and PyPI's Linux torch wheel
is 539 MB (torch 2.15.0, cp311) and pulls the nvidia-* CUDA packages (several
GB more): too much for the CI's fresh venv on 2 cores. Their readers of our
files are NumPy (``numpy.memmap``, ``numpy.frombuffer``); torch appears only as
base classes (``torch.utils.data.Dataset``, ``IterableDataset``), type hints
(``torch.Tensor``) and ``torch.distributed`` queries. So the tests install the
packages without their dependencies (``.ci/run``: ``pip install --no-deps
megatron-core mosaicml-streaming``) and put a stand-in ``torch`` in
``sys.modules`` that holds exactly those: plain base classes, a Tensor type,
and a ``torch.distributed`` that is not available. Nothing of the readers
themselves is replaced.

Each package's top-level ``__init__`` imports its whole training stack (models,
fused kernels, HF transformers); the loaders register the bare package
directories instead, so that only the reader modules and their own imports
run: for megatron-core, ``megatron.core.datasets.indexed_dataset`` with
``megatron.core.utils`` stood in by the one function it takes from it
(``log_single_rank``, the real one from ``megatron.core._rank_utils``); for
streaming, ``streaming.base.dataset``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

import pytest

__all__ = ["megatron_indexed_dataset", "streaming_dataset"]


def _module(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    return module


def _stand_in_torch() -> dict[str, types.ModuleType]:
    class Dataset:
        pass

    class IterableDataset(Dataset):
        pass

    class Tensor:
        pass

    distributed = _module("torch.distributed", is_available=lambda: False, is_initialized=lambda: False)
    data = _module("torch.utils.data", Dataset=Dataset, IterableDataset=IterableDataset,
                   get_worker_info=lambda: None)
    utils = _module("torch.utils", data=data)
    torch = _module("torch", Tensor=Tensor, distributed=distributed, utils=utils)
    return {"torch": torch, "torch.distributed": distributed, "torch.utils": utils, "torch.utils.data": data}


def _bare_packages(top: str, names: tuple[str, ...]) -> dict[str, types.ModuleType]:
    """Package modules for ``names`` pointing at the installed directories, without running their ``__init__``."""
    spec = importlib.util.find_spec(top)
    if spec is None:
        pytest.fail(f"{top} is not installed: pip install --no-deps megatron-core==0.16.1 mosaicml-streaming==0.13.0 "
                    "(as .ci/run does)")
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    packages = {}
    for name in names:
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(root, *name.split("."))]
        packages[name] = package
    return packages


def _install(stand_ins: dict[str, types.ModuleType], monkeypatch) -> None:
    """Puts the stand-ins into sys.modules, in place of any module of their packages
    (monkeypatch restores sys.modules' entries after the test)."""
    tops = {name.split(".")[0] for name in stand_ins}
    for name in [n for n in sys.modules if n.split(".")[0] in tops]:
        monkeypatch.delitem(sys.modules, name)
    for name, stand_in in stand_ins.items():
        monkeypatch.setitem(sys.modules, name, stand_in)


def megatron_indexed_dataset(monkeypatch):
    """megatron-core's ``IndexedDataset`` class (``megatron.core.datasets.indexed_dataset``)."""
    _install({**_stand_in_torch(), **_bare_packages("megatron", ("megatron", "megatron.core"))}, monkeypatch)
    rank_utils = importlib.import_module("megatron.core._rank_utils")
    monkeypatch.setitem(sys.modules, "megatron.core.utils",
                        _module("megatron.core.utils", log_single_rank=rank_utils.log_single_rank))
    return importlib.import_module("megatron.core.datasets.indexed_dataset").IndexedDataset


def streaming_dataset(monkeypatch):
    """mosaicml-streaming's ``StreamingDataset`` class (``streaming.base.dataset``)."""
    _install({**_stand_in_torch(), **_bare_packages("streaming", ("streaming", "streaming.base"))}, monkeypatch)
    return importlib.import_module("streaming.base.dataset").StreamingDataset
