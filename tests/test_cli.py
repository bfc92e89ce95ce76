"""The command table (bertlab.cli): each command's module is found when it runs, and only then."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from bertlab.cli import COMMANDS, command_module


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_runs_the_main_of_its_module(command):
    assert callable(importlib.import_module(command_module(command)).main)


def test_help_lists_the_commands_without_importing_any_of_them():
    script = ("import sys; from bertlab import cli; cli.main(['--help']); "
              "print(sorted(name for name in sys.modules if name.startswith(('bertlab.commands', 'lightning', 'hydra'))))")
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert all(f"  {command} " in output for command in COMMANDS)
    assert output.rstrip().endswith("[]")
