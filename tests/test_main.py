"""`python -m bertlab` (bertlab.__main__): the command line of the package, its exit status the command's."""

from __future__ import annotations

import subprocess
import sys

from bertlab.cli import COMMANDS


def test_python_m_bertlab_runs_the_command_line():
    result = subprocess.run([sys.executable, "-m", "bertlab", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert all(f"  {command} " in result.stdout for command in COMMANDS)


def test_an_unknown_command_exits_with_a_one_line_error_and_status_2():
    result = subprocess.run([sys.executable, "-m", "bertlab", "pretrain"], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "pretrain" in result.stderr
