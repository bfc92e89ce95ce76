"""The machine a benchmark runs on (bertlab.bench.machine): the libraries it needs."""

from __future__ import annotations

import pytest

from bertlab.bench.machine import require_dev_extra
from bertlab.errors import BertlabError


def test_missing_dev_extra_says_how_to_install_it():
    with pytest.raises(BertlabError, match=r'pip install -e "\.\[dev\]"'):
        require_dev_extra("a_module_that_is_not_installed")
