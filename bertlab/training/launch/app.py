"""Launches a training command: composes its config and checks it (bertlab.training.checks.before_run) before
anything is created, prepares a run's data and module, then runs it, or sweeps it (-m) through Hydra's sweeper
and launcher; an error of Hydra or OmegaConf about the config becomes a bertlab error whose one line names the
key, the value and what was expected (`user_error`), which bertlab.cli reports.

Hydra's flags on a command's line are taken anywhere (`fine-tune +recipe=sst2 -m seed=1,2,3`), checked, and
parsed before the overrides. bertlab neither parses the overrides nor composes the config itself: Hydra does,
once to check, once to run (and once per job of a sweep).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from logging.handlers import BufferingHandler
from pathlib import Path

import hydra
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import configure_log
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from hydra.types import RunMode
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from bertlab.argument_checks import format_value
from bertlab.errors import BertlabError, ConfigError, UsageError
from bertlab.training.checks.before_run import check
from bertlab.training.checks.environment import check_output_folder, missing_plugin_message
from bertlab.training.launch.config_tree import CONFIG_MODULE, register_configs
from bertlab.training.run.run_folder import is_rank_zero

# Hydra's flags, and those of them that take a value: bertlab takes them anywhere on the command
# line (`fine-tune +recipe=sst2 -m seed=1,2,3`); Hydra's parser wants them before the overrides.
HYDRA_FLAGS = {"-h", "--help", "-hh", "--hydra-help", "--version", "--resolve", "-m", "--multirun",
               "-c", "--cfg", "-p", "--package", "-i", "--info", "-cn", "--config-name",
               "-cd", "--config-dir", "-sc", "--shell-completion"}
CFG_CHOICES = ("job", "hydra", "all")
INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
FLAGS_WITH_VALUE = {"-c", "--cfg", "-p", "--package", "-cn", "--config-name", "-cd", "--config-dir"}
AMBIGUOUS = re.compile(r"Ambiguous value for argument '(.*?)'")


def launch(config_name: str, task: Callable[..., object], argv: list[str], prog: str,
           also_check: Callable[[DictConfig], object] | None = None,
           prepare: Callable[[DictConfig], object] | None = None) -> None:
    """Runs `task` on the config composed from `config_name` and the command line `argv`, or sweeps it (-m) through
    the configured sweeper and launcher; `prog` is "bertlab <command>". The config, and each job of a sweep over
    listed values, is composed and checked before anything is created (`also_check` checks the `hydra` group of the
    run, or of the sweep as a whole, too: its folders, its command line); for a run, `prepare` then builds what
    `task` takes as `prepared`, before Hydra makes the run's folder (a job of a sweep prepares itself). An error of
    Hydra or OmegaConf about the config leaves as a bertlab error."""
    register_configs()
    arguments = command_line(prog).parse_args(flags_first(argv))
    overrides = list(arguments.overrides)
    if not is_rank_zero():
        # Lightning's DDP launcher restarts this command line for the other ranks: only rank 0 writes
        # Hydra's .hydra/ folder and log file.
        overrides += ["hydra.output_subdir=null", "hydra/job_logging=stdout"]
    if arguments.config_dir is not None:
        config_dir = Path(arguments.config_dir).absolute()
        if not config_dir.is_dir():
            raise UsageError(f"command line: --config-dir {arguments.config_dir}: no such folder")
        overrides.append(f"hydra.searchpath=[file://{config_dir}]")
    try:
        with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
            # hydra.main (Hydra 1.3.8) reads its command line from sys.argv only; the Hydra object of the Compose API
            # runs, sweeps, shows and helps as hydra.main does, with the command line given here.
            hydra_app = GlobalHydra.instance().hydra
            run_command(hydra_app, arguments.config_name or config_name, task, arguments, overrides, also_check,
                        prepare)
    except Exception as error:
        reported = user_error(error)
        if reported is None or reported is error:
            raise
        raise reported from (error if reported.__traceback__ is None else None)


def run_command(hydra_app, config_name: str, task: Callable[..., object], arguments: argparse.Namespace,
                overrides: list[str], also_check: Callable[[DictConfig], object] | None,
                prepare: Callable[[DictConfig], object] | None) -> None:
    """What Hydra's flags ask for; without one, the checked run or sweep."""
    if arguments.help or arguments.hydra_help:
        show_help = hydra_app.app_help if arguments.help else hydra_app.hydra_help
        show_help(config_name=config_name, args_parser=command_line(""), args=arguments)
    elif arguments.cfg is not None:
        hydra_app.show_cfg(config_name=config_name, overrides=overrides, cfg_type=arguments.cfg,
                           package=arguments.package, resolve=arguments.resolve)
    elif arguments.info is not None:
        hydra_app.show_info(arguments.info, config_name=config_name, overrides=overrides)
    elif arguments.shell_completion:
        hydra_app.shell_completion(config_name=config_name, overrides=overrides)
    elif arguments.version:
        print(f"Hydra {hydra.__version__}")
    else:
        mode = hydra_app.get_mode(config_name=config_name, overrides=overrides)
        if mode is None or (arguments.multirun and mode == RunMode.RUN):
            mode = RunMode.MULTIRUN if arguments.multirun else RunMode.RUN
            overrides = [*overrides, f"hydra.mode={mode.name}"]
        configs = list(checked_configs(hydra_app, config_name, overrides, mode))
        for config, run_dir, new_run in configs:
            check(config, run_dir, new_run)
            if mode == RunMode.MULTIRUN and run_dir is None:  # the sweep as a whole
                check_output_folder(config.hydra.sweep.dir)
        if also_check is not None:
            also_check(configs[0][0].hydra)
        if mode == RunMode.MULTIRUN:  # a job's error comes back through the sweeper, Hydra naming the job
            hydra_app.multirun(config_name=config_name, task_function=SweepJob(task), overrides=overrides)
            return
        run = RunTask(task)
        if prepare is not None:
            run.prepared, run.records = prepared_before_hydra(configs[0][0], prepare)
        hydra_app.run(config_name=config_name, task_function=run, overrides=overrides)
        if run.errors:
            raise run.errors[0]


@dataclass
class SweepJob:
    """Hydra's task function of a job of a sweep: `task(cfg)`. A launcher that runs each job in a process of its
    own (submitit) unpickles it there, which imports this module and so registers bertlab's resolvers
    (bertlab.training.launch.config_tree) before the job's config is resolved."""
    task: Callable[[DictConfig], object]

    def __call__(self, cfg: DictConfig) -> object:
        return self.task(cfg)


@dataclass
class RunTask:
    """Hydra's task function of a run: `task(cfg)`, or `task(cfg, prepared=…)` with what was prepared before Hydra
    made the run's folder, whose log `records` then go into the run's log file too. Its error is kept in `errors`
    rather than raised: Hydra 1.3.8 writes a line of its own about the error of a run it raises
    (JobReturn.return_value), and a run's error has one line, bertlab.cli's."""
    task: Callable[..., object]
    prepared: object = None
    records: list[logging.LogRecord] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)

    def __call__(self, cfg: DictConfig) -> object:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.FileHandler):  # the run's log file, which Hydra has just opened
                for record in self.records:
                    handler.handle(record)
        try:
            return self.task(cfg) if self.prepared is None else self.task(cfg, prepared=self.prepared)
        except Exception as error:
            self.errors.append(error)
            return None


def prepared_before_hydra(config: DictConfig,
                          prepare: Callable[[DictConfig], object]) -> tuple[object, list[logging.LogRecord]]:
    """`prepare(config)` as in Hydra's job, but before Hydra makes the run's folder: it reads the launch's Hydra
    config, and logs to the console; its log records are returned for the run's log file."""
    HydraConfig.instance().set_config(config)
    logging_config = OmegaConf.to_container(config.hydra.job_logging, resolve=False)
    files = {name for name, handler in logging_config.get("handlers", {}).items() if "filename" in handler}
    for name in files:
        del logging_config["handlers"][name]
    if "root" in logging_config:
        logging_config["root"]["handlers"] = [name for name in logging_config["root"].get("handlers", [])
                                              if name not in files]
    configure_log(OmegaConf.create(logging_config), config.hydra.verbose)
    kept = BufferingHandler(capacity=sys.maxsize)
    logging.getLogger().addHandler(kept)
    try:
        return prepare(config), kept.buffer
    finally:
        logging.getLogger().removeHandler(kept)


def checked_configs(hydra_app, config_name: str, overrides: list[str],
                    mode: RunMode) -> Iterator[tuple[DictConfig, Path | None, bool]]:
    """(config, its run folder, whether the launch creates it) of what a launch in `mode` runs: the run, or the sweep
    as a whole and each job of its sweeps over listed values (`seed=1,2`, `glue=cola,rte`), numbered as Hydra's basic
    sweeper numbers them. A sweeper's ranges (`tag(log, interval(…))`) are checked as search spaces, with the
    sweep."""
    config = hydra_app.compose_config(config_name=config_name, overrides=overrides, run_mode=mode,
                                      with_log_configuration=False)
    if mode == RunMode.RUN:
        yield config, Path(config.hydra.run.dir), True
        return
    yield config, None, False
    choices = []  # each override's values, in order, as the basic sweeper splits them
    for text, item in zip(overrides, OverridesParser.create().parse_overrides(overrides)):
        if not item.is_sweep_override():
            choices.append([text])
        elif item.is_discrete_sweep():
            choices.append([f"{item.get_key_element()}={value}" for value in item.sweep_string_iterator()])
    for number, job in enumerate(itertools.product(*choices)):
        config = hydra_app.compose_config(config_name=config_name, overrides=list(job), run_mode=mode,
                                          with_log_configuration=False)
        with open_dict(config.hydra.job):
            config.hydra.job.num = number
        yield config, Path(config.hydra.sweep.dir) / str(config.hydra.sweep.subdir), False


def command_line(prog: str) -> argparse.ArgumentParser:
    """Hydra's flags that bertlab takes, and the overrides; Hydra's help lists them."""
    parser = argparse.ArgumentParser(prog=prog, add_help=False)
    parser.add_argument("overrides", nargs="*", help="Any key=value arguments to override config values "
                                                     "(use dots for.nested=overrides)")
    parser.add_argument("-h", "--help", action="store_true", help="Application's help")
    parser.add_argument("-hh", "--hydra-help", action="store_true", help="Hydra's help")
    parser.add_argument("--version", action="store_true", help="Show Hydra's version and exit")
    parser.add_argument("-c", "--cfg", choices=CFG_CHOICES, help="Show config instead of running [job|hydra|all]")
    parser.add_argument("--resolve", action="store_true", help="Used in conjunction with --cfg, resolve config "
                                                                "interpolations before printing.")
    parser.add_argument("-p", "--package", help="Config package to show")
    parser.add_argument("-m", "--multirun", action="store_true", help="Run multiple jobs with the configured launcher "
                                                                      "and sweeper")
    parser.add_argument("-sc", "--shell-completion", action="store_true", help="Install or Uninstall shell completion")
    parser.add_argument("-cn", "--config-name", help="Overrides the config_name specified in hydra.main()")
    parser.add_argument("-cd", "--config-dir", help="Adds an additional config dir to the config search path")
    parser.add_argument("-i", "--info", nargs="?", const="all", choices=INFO_CHOICES,
                        help="Print Hydra information [all|config|defaults|defaults-tree|plugins|searchpath]")
    return parser


def flags_first(argv: list[str]) -> list[str]:
    """`argv` with Hydra's flags (and their values) before the overrides; an unknown flag or a flag
    without its value is a UsageError, rather than argparse's usage block."""
    flags, overrides = [], []
    tokens = iter(argv)
    for token in tokens:
        if not token.startswith("-"):
            overrides.append(token)
            continue
        if token not in HYDRA_FLAGS:
            raise UsageError(f"command line: unknown flag {token}; see --help for the flags")
        flags.append(token)
        if token in FLAGS_WITH_VALUE:
            value = next(tokens, None)
            if value is None or (token in ("-c", "--cfg") and value not in CFG_CHOICES):
                raise UsageError(f"command line: {token} needs a value"
                                  + (f" ({', '.join(CFG_CHOICES)})" if token in ("-c", "--cfg") else "")
                                  + "; see --help for the flags")
            flags.append(value)
    return [*flags, *overrides]


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

