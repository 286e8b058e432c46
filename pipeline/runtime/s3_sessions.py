"""One botocore model loader for all of Beam's S3 clients in a process.

Beam's S3 filesystem makes a new ``boto3.session.Session()`` for every call
(each match, open, exists, rename or delete), and every new session reads and
parses botocore's JSON service models again: 0.21 s of CPU per call here
(0.014 s with the shared loader). ``share_model_loader`` gives the sessions Beam makes one loader,
which parses each model once; the clients themselves stay Beam's, one per call,
with its own credentials and endpoint, as before.

boto3 itself is imported when a client is first made, not with Beam
(``pipeline.runtime.beam_import`` keeps it out while Beam is imported): importing it
takes 0.19 s and 24 MiB, which every command and every worker forked from it
paid, though only a job that reads or writes ``s3://`` uses it.
"""

from __future__ import annotations

import importlib.util
import sys
import threading

from pipeline.runtime.beam_internals import S3_CLIENT_BOTO3

__all__ = ["share_model_loader"]

_BEAM_CLIENT_MODULE = S3_CLIENT_BOTO3.module
_lock = threading.Lock()
_loader = None


def share_model_loader() -> None:
    """Makes the sessions of Beam's S3 clients share one model loader, and boto3 imported when
    the first one is made (once; only where Beam has its S3 client and boto3 is installed)."""
    module = sys.modules.get(_BEAM_CLIENT_MODULE)
    if module is None or isinstance(module.boto3, _Boto3):
        return
    if module.boto3 is None and importlib.util.find_spec("boto3") is None:
        return  # not installed: Beam's client says so when it is used
    module.boto3 = _Boto3(module.boto3)


class _Delegate:
    """Everything of ``module`` but what the subclass defines."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)


class _Boto3:
    """Stands for the ``boto3`` module in Beam's client module: imports it when first used
    (unless given it); its ``session`` is ``_Sessions``."""

    def __init__(self, boto3=None):
        self._boto3 = boto3
        self._session = None

    def _imported(self):
        if self._boto3 is None:
            import boto3

            self._boto3 = boto3
        return self._boto3

    @property
    def session(self):
        if self._session is None:
            self._session = _Sessions(self._imported().session)
        return self._session

    def __getattr__(self, name):
        return getattr(self._imported(), name)


class _Sessions(_Delegate):
    """Stands for ``boto3.session``: ``Session()`` is a session whose botocore session takes
    the shared loader."""

    def Session(self, *args, **kwargs):  # noqa: N802 - boto3's name
        import botocore.session

        if "botocore_session" not in kwargs:
            core = botocore.session.get_session()
            core.register_component("data_loader", _shared_loader(core))
            kwargs["botocore_session"] = core
        return self._module.Session(*args, **kwargs)


def _shared_loader(core):
    global _loader
    with _lock:
        if _loader is None:
            _loader = core.get_component("data_loader")
        return _loader
