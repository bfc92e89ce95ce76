"""The sections of the benchmark (bertlab.bench.sections): the fast paths a run measures."""

from __future__ import annotations

import pytest

from bertlab.bench import pretraining, sections
from bertlab.errors import BertlabError


def test_fast_paths_are_none_all_or_the_named_ones():
    switches = pretraining.FAST_PATH_SWITCHES
    assert sections.chosen_fast_paths(None, switches) == []
    assert sections.chosen_fast_paths("all", switches) == list(switches)
    assert sections.chosen_fast_paths("CUDA graphs, foreach AdamW", switches) == ["CUDA graphs", "foreach AdamW"]
    with pytest.raises(BertlabError, match="--fast-paths: unknown cuda graphs; expected some of fused_qkv off"):
        sections.chosen_fast_paths("cuda graphs", switches)
