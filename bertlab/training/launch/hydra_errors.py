"""Hydra's and OmegaConf's errors about a config as bertlab errors, whose one line names the key, the value and
what was expected (bertlab.cli reports them)."""

from __future__ import annotations

import re

from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from bertlab.argument_checks import format_value
from bertlab.errors import BertlabError, ConfigError
from bertlab.training.checks.environment import missing_plugin_message
from bertlab.training.checks.run_folder_checks import check_output_folder

AMBIGUOUS = re.compile(r"Ambiguous value for argument '(.*?)'")


def user_error(error: BaseException) -> BertlabError | None:
    """The BertlabError behind `error` (Hydra's instantiate and OmegaConf's resolvers wrap the errors
    raised inside them), or a one-line ConfigError for an error of Hydra or OmegaConf about the config;
    None for anything else, which is a bug and keeps its traceback."""
    chain = []
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, BertlabError):
            return cause
        chain.append(cause)
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    for cause in chain:
        if isinstance(cause, MisconfigurationException):  # Lightning's, wrapped by Hydra's instantiate
            return ConfigError(f"Lightning refused the trainer settings: {one_line(cause)}; check the trainer.* "
                               f"and callbacks.* keys")
        if isinstance(cause, (ValidationError, ConfigKeyError, ConfigAttributeError, MissingConfigException,
                              OverrideParseException)):
            return ConfigError(config_message(cause, error))
    if isinstance(error, HydraException) and (ambiguous := AMBIGUOUS.match(str(error))):
        return ConfigError(f"{ambiguous[1]}: several values need -m (--multirun) to sweep over them; for a "
                           f"list write key=[a,b], for a string with commas quote it: key='a,b'")
    if isinstance(error, (HydraException, OmegaConfBaseException)):
        return ConfigError(one_line(error))
    if isinstance(error, OSError) and error.filename:
        check_output_folder(error.filename)  # raises the one-line error when the folder is the problem
    return None


def config_message(cause: BaseException, error: BaseException) -> str:
    """What a user reads for a value Hydra refused: which key, which value, what was expected."""
    if isinstance(cause, OverrideParseException):
        return f"cannot parse the command line: {one_line(cause)}"
    if isinstance(cause, MissingConfigException):
        if plugin_missing := missing_plugin_message(cause.missing_cfg_file or ""):
            return plugin_missing
        group, _, name = (cause.missing_cfg_file or "").rpartition("/")
        if cause.options is not None and group:
            what = "recipe" if group == "recipe" else f"{group} config"
            return f"unknown {what} {name!r}; known {what}s: {', '.join(cause.options)}"
        return one_line(cause)
    if isinstance(cause, ValidationError) and cause.child_node is not None:
        default = cause.child_node._value()
        if default is None:  # an optional key: its node's class names the type (FloatNode, IntegerNode, …)
            expected = f"{type(cause.child_node).__name__.removesuffix('Node').lower()} or null"
        else:
            expected = f"{type(default).__name__} (like the default {format_value(default)})"
        return f"{cause.full_key}={format_value(cause.value)}: expected {expected}, got {type(cause.value).__name__}"
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and cause.parent_node is not None:
        key, parent = str(cause.full_key), cause.parent_node
        known = ", ".join(str(k) for k in parent.keys() if k != "_target_") or "no keys"
        where = f"{key.rpartition('.')[0]!r} has" if "." in key else "top-level keys are"
        schema_free = OmegaConf.get_type(parent) is dict  # a structured schema takes no new keys
        return f"unknown config key {key!r}; {where}: {known}" + (f". To add a new key write +{key}=…" if schema_free else "")
    return one_line(error)


def one_line(error: BaseException) -> str:
    """Hydra's message without its blank lines, search-path listing and documentation links."""
    lines = []
    for line in str(error).splitlines():
        line = line.strip()
        if line.startswith("Config search path"):
            break
        if line and not line.startswith("See https://"):
            lines.append(line)
    return " ".join(line if line.endswith((".", ":")) or line is lines[-1] else f"{line};" for line in lines)

