"""``--config FILE.yaml`` or ``--config NAME``: flag values from YAML files, below the command line.

A NAME (no path separator, no ``.yaml``) is a preset shipped with the package,
``pipeline/configs/NAME.yaml`` (``configs/`` in the checkout): ``gpt2-32k`` and
the runner presets ``flink``, ``spark`` and ``dataflow``.

A config file is a YAML mapping whose keys are the command's flag names with
underscores (``vocab_size: 32000``, ``input: [a/*.jsonl.gz, b/*.jsonl.gz]``),
plus ``beam_options``: Beam's own flags, either as a mapping

    beam_options:
      runner: FlinkRunner
      flink_master: localhost:8081
      experiments: [use_deprecated_read]   # a list repeats the flag
      save_main_session: true              # true: a bare flag; false: left out

or as a list of flags (``["--runner=FlinkRunner", ...]``). Several files may be
given; later files override earlier ones. Precedence, lowest first: built-in
defaults, config files in order, command-line flags. Beam flags from files come
before the command line's, and Beam takes the last value of a repeated flag.
Relative paths in a file are relative to the current directory, like on the
command line.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable, Mapping, Sequence

import yaml

from pipeline.command_machinery.errors import UserError

__all__ = ["PRESETS_DIR", "Setting", "beam_flags", "config_file", "load_configs", "preset_names", "resolve"]

# The presets installed with the package (setup.py's package_data): pipeline/configs/, beside this package.
PRESETS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


class Setting:
    """How one flag's value is checked when it comes from a YAML file.

    Args:
      kind: "str", "int", "bool" or "list" (a list of strings; a lone string
        is taken as a one-element list).
      default: the value when neither a file nor the command line sets it.
    """

    def __init__(self, kind: str, default: Any = None):
        self.kind = kind
        self.default = default

    def check(self, source: str, key: str, value: Any) -> Any:
        def wrong(expected: str) -> UserError:
            return UserError(f"{source}: {key} must be {expected}, not {value!r}")

        if value is None:
            return None
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise wrong("an integer")
            return value
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise wrong("true or false")
            return value
        if self.kind == "list":
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise wrong("a string or a list of strings")
            return list(values)
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise wrong("a string")
        return str(value)


def beam_flags(source: str, value: Any) -> list[str]:
    """Turns a config file's ``beam_options`` into Beam command-line flags."""
    if value is None:
        return []
    if isinstance(value, list):
        if not all(isinstance(v, str) and v.startswith("--") for v in value):
            raise UserError(f"{source}: beam_options as a list must hold flags like '--runner=FlinkRunner'")
        return list(value)
    if not isinstance(value, dict):
        raise UserError(f"{source}: beam_options must be a mapping of option names to values, or a list of flags")
    flags = []
    for name, option in value.items():
        flag = "--" + str(name).lstrip("-")
        for item in option if isinstance(option, list) else [option]:
            if item is True:
                flags.append(flag)
            elif item is False or item is None:
                continue
            elif isinstance(item, (dict, list)):
                raise UserError(f"{source}: beam_options.{name} must be a plain value or a list of them")
            else:
                flags.append(f"{flag}={item}")
    return flags


def preset_names() -> list[str]:
    """The names of the shipped presets, sorted."""
    return sorted(name.removesuffix(".yaml") for name in os.listdir(PRESETS_DIR) if name.endswith(".yaml"))


def config_file(value: str) -> str:
    """The file a ``--config`` value names: a path as given, or a shipped preset's file.

    Raises:
      UserError: a preset name that is not shipped (the message lists those that are).
    """
    if "/" in value or os.sep in value or value.endswith((".yaml", ".yml")):
        return value
    path = os.path.join(PRESETS_DIR, f"{value}.yaml")
    if not os.path.isfile(path):
        raise UserError(f"--config {value}: no such preset; the shipped presets are {', '.join(preset_names())} "
                        "(or give the path of a .yaml file)")
    return path


def load_configs(paths: Sequence[str], settings: Mapping[str, Setting]) -> tuple[dict[str, Any], list[str]]:
    """Reads config files in order; later files override earlier ones.

    Args:
      paths: YAML files, or names of shipped presets (``config_file``).
      settings: the keys a file may hold (besides ``beam_options``).

    Returns:
      (values by key, Beam flags in order).

    Raises:
      UserError: a file that is missing, not UTF-8, not YAML, nested too
        deeply, not a mapping, or holding an unknown key or a value of the
        wrong type.
    """
    values: dict[str, Any] = {}
    flags: list[str] = []
    for path in map(config_file, paths):
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except OSError as e:
            raise UserError(f"cannot read config file {path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise UserError(f"config file {path} is not UTF-8 text") from None
        except RecursionError:
            raise UserError(f"config file {path} is nested too deeply") from None
        except yaml.YAMLError as e:
            where = getattr(e, "problem_mark", None)
            at = f" (line {where.line + 1})" if where else ""
            raise UserError(f"config file {path} is not valid YAML{at}: {getattr(e, 'problem', e)}") from None
        if data is None:
            continue
        if not isinstance(data, dict):
            raise UserError(f"config file {path} must hold a mapping of flag names to values")
        for key, value in data.items():
            key = str(key).replace("-", "_")
            if key == "beam_options":
                flags.extend(beam_flags(path, value))
            elif key in settings:
                values[key] = settings[key].check(path, key, value)
            else:
                known = ", ".join(sorted([*settings, "beam_options"]))
                raise UserError(f"config file {path}: unknown key {key!r} (known: {known})")
    return values, flags


def resolve(args: argparse.Namespace, settings: Mapping[str, Setting], configs: Sequence[str] = ()) -> list[str]:
    """Fills ``args`` in place: command line, else config files, else defaults.

    The parser must leave every setting's default as None, so that "not given
    on the command line" can be told apart from "given the default value".

    Returns:
      The Beam flags from the config files, to go before the command line's.
    """
    values, flags = load_configs(configs, settings)
    for key, setting in settings.items():
        if getattr(args, key, None) is None:
            value = values.get(key)
            setattr(args, key, setting.default if value is None else value)
    return flags


def default_help(settings: Mapping[str, Setting]) -> Callable[[str, str], str]:
    """Returns help(key, text) -> text with "(default: X)" from the settings."""

    def help_text(key: str, text: str) -> str:
        default = settings[key].default
        return text if default in (None, False, []) else f"{text} (default: {default})"

    return help_text
