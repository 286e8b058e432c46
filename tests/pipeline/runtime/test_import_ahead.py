"""What a warm worker imports ahead of its job (pipeline.runtime.worker.import_ahead): a module
that does not exist fails loudly, naming it, instead of silently losing its warm-up."""

import importlib.util

import pytest

from pipeline.cli import WORKER_MODULES
from pipeline.runtime import worker


def test_a_module_that_does_not_exist_fails_naming_it():
    with pytest.raises(ModuleNotFoundError, match=r"transforms\.no_such_module"):
        worker.import_ahead(["transforms.read", "transforms.no_such_module"])
    with pytest.raises(ModuleNotFoundError, match=r"no_such_package\.read"):
        worker.import_ahead(["no_such_package.read"])


def test_the_modules_that_exist_are_imported():
    worker.import_ahead(["transforms.read", "json"])


@pytest.mark.parametrize("command", sorted(WORKER_MODULES))
def test_every_module_a_command_warms_up_exists(command):
    for module in WORKER_MODULES[command]:
        assert importlib.util.find_spec(module) is not None, f"{command}: {module}"
