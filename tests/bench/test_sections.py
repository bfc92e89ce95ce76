"""The sections of the benchmark (bertlab.bench.sections): the fast paths a run measures."""

from __future__ import annotations

import pytest
import torch

from bertlab.bench import pretraining, sections
from bertlab.errors import BertlabError


def test_fast_paths_are_none_all_or_the_named_ones():
    switches = pretraining.FAST_PATH_SWITCHES
    assert sections.chosen_fast_paths(None, switches) == []
    assert sections.chosen_fast_paths("all", switches) == list(switches)
    assert sections.chosen_fast_paths("CUDA graphs, foreach AdamW", switches) == ["CUDA graphs", "foreach AdamW"]
    with pytest.raises(BertlabError, match="--fast-paths: unknown cuda graphs; expected some of fused_qkv off"):
        sections.chosen_fast_paths("cuda graphs", switches)


def test_the_token_classification_row_is_skipped_in_one_line_without_conll(tmp_path, capsys):
    import argparse

    from bertlab.bench.sections import Progress, conll_results

    args = argparse.Namespace(data_dir=str(tmp_path), sections=["fine-tuning"])
    assert conll_results(args, "model", "name", torch.device("cpu"), ["fp32"], Progress()) == []
    assert "skipping token-classification fine-tuning: no CoNLL-2003 at" in capsys.readouterr().err
