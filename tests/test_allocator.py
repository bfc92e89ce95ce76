"""The allocator setting that `python -m bertlab` applies, checked in fresh processes: it is process-wide."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

CHECK = "from bertlab.allocator import keep_freed_memory; print(keep_freed_memory())"


def keeps_freed_memory(**env: str) -> str:
    result = subprocess.run([sys.executable, "-c", CHECK], env={**os.environ, **env}, capture_output=True,
                            text=True, check=True)
    return result.stdout.strip()


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting exists only in glibc's malloc")
def test_glibc_keeps_freed_memory_unless_the_user_opts_out():
    assert keeps_freed_memory() == "True"
    assert keeps_freed_memory(BERTLAB_SYSTEM_MALLOC="1") == "False"
