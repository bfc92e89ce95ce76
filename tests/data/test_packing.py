"""SequencePacker (bertlab.data.packing) on seeded random toy corpora: plain text is packed whole."""

from __future__ import annotations

import random

import datasets
import pytest

from bertlab.data.packing import SequencePacker

CLS, SEP = 2, 3


def random_documents(seed: int) -> list[list[list[int]]]:
    """Documents of sentences of ordinary token ids (5 and up), of every length from one token to several times
    a sequence's budget, so that sentences are cut and chunks end inside them."""
    rng = random.Random(seed)
    return [[[rng.randrange(5, 1000) for _ in range(rng.choice([1, 2, rng.randrange(1, 40), rng.randrange(1, 120)]))]
             for _ in range(rng.randrange(1, 12))] for _ in range(rng.randrange(2, 30))]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("short_seq_prob", [0.0, 0.1, 1.0])
def test_plain_text_is_packed_whole_each_token_once_in_order(seed, short_seq_prob):
    documents = random_documents(seed)
    max_seq_length = random.Random(seed).choice([8, 16, 64])
    packer = SequencePacker(datasets.Dataset.from_dict({"input_ids": documents}), max_seq_length=max_seq_length,
                            short_seq_prob=short_seq_prob, nsp=False, seed=seed, cls_token_id=CLS, sep_token_id=SEP)
    packed = packer({"input_ids": documents}, list(range(len(documents))))
    text = [token for row in packed["input_ids"] for token in row if token not in (CLS, SEP)]
    assert text == [token for document in documents for sentence in document for token in sentence]
    assert all(len(row) <= max_seq_length and row[0] == CLS and row[-1] == SEP for row in packed["input_ids"])
