"""Hydra's flags on a command's line: taken anywhere (`fine-tune +recipe=sst2 -m seed=1,2,3`), checked, and
parsed before the overrides."""

from __future__ import annotations

import argparse

from bertlab.errors import UsageError

# Hydra's flags, and those of them that take a value: bertlab takes them anywhere on the command
# line (`fine-tune +recipe=sst2 -m seed=1,2,3`); Hydra's parser wants them before the overrides.
HYDRA_FLAGS = {"-h", "--help", "-hh", "--hydra-help", "--version", "--resolve", "-m", "--multirun",
               "-c", "--cfg", "-p", "--package", "-i", "--info", "-cn", "--config-name",
               "-cd", "--config-dir", "-sc", "--shell-completion"}
CFG_CHOICES = ("job", "hydra", "all")
INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
FLAGS_WITH_VALUE = {"-c", "--cfg", "-p", "--package", "-cn", "--config-name", "-cd", "--config-dir"}


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
