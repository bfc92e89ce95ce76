"""The errors a user acts on (bertlab.errors), as the command line reports them: one `bertlab: error:` line, exit
status 2 for a malformed command line and 1 for the others; a ConfigError is also a ValueError, so code that
catches ValueError around a bertlab call keeps working."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from bertlab import cli
from bertlab.errors import BertlabError, CheckpointError, ConfigError, DataError, UsageError


def test_a_config_error_is_a_value_error_and_every_error_a_bertlab_error():
    assert issubclass(ConfigError, ValueError)
    assert all(issubclass(kind, BertlabError) for kind in (UsageError, ConfigError, CheckpointError, DataError))


@pytest.mark.parametrize("error, status", [(UsageError("train: unknown flag --x"), 2),
                                           (ConfigError("optimizer.lr=-1: must be in (0, inf)"), 1),
                                           (CheckpointError("model.init_from=x: no such checkpoint folder"), 1),
                                           (DataError("data.source=y: no such file"), 1)])
def test_each_error_ends_the_command_in_one_line_with_its_status(monkeypatch, capsys, error, status):
    def main(arguments, prog):
        raise error

    monkeypatch.setitem(sys.modules, "failing_command", SimpleNamespace(main=main))
    monkeypatch.setattr(cli, "command_module", lambda command: "failing_command")
    monkeypatch.delenv("BERTLAB_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "--help"])  # bench: the one command that leaves the allocator as it is
    assert exit_.value.code == status
    assert capsys.readouterr().err.strip() == f"bertlab: error: {error}"
