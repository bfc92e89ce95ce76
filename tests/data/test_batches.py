"""Tokenized rows to padded batches (bertlab.data.batches): `TokenizedRows` and `collate` for classification,
`PretrainingCollator` for pretraining; and the orders in which to visit a split: the length-grouped sampler is
seeded, covers every row, groups lengths, shards its batches across ranks and resumes mid-epoch."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from bertlab.data.batches import LengthGroupedSampler, PretrainingCollator, TokenizedRows, collate, padding_efficiency
from bertlab.data.encoding import tokenize_dataset
from bertlab.errors import ConfigError
from bertlab.tokenizer import load_tokenizer
from tests.data.test_classification import tokenizer_dir

__all__ = ["tokenizer_dir"]  # the fixture, shared


@pytest.mark.parametrize("labels", [np.array([1, 0, 1, 1, 0]), np.array([0.5, -1.0, 2.0, np.nan, 0.0])],
                         ids=["class", "regression"])
def test_tokenized_rows_hold_and_collate_what_the_dataset_formats(tokenizer_dir, labels):
    texts = ["good film", "a long and dull movie with an awful ending", "fun", "", "the plot the actor"]
    dataset = tokenize_dataset(datasets.Dataset.from_dict({"text": texts, "second": texts[::-1]}),
                               load_tokenizer(tokenizer_dir), text_column="text", text_pair_column="second",
                               max_seq_length=8, labels=labels)
    for rows in (dataset, dataset.select([4, 0, 2])):  # a selection reads through datasets' index mapping
        held = TokenizedRows(rows)
        assert len(held) == len(rows)
        for i, expected in enumerate(rows):
            assert held[i].keys() == expected.keys()
            for name, value in expected.items():
                np.testing.assert_array_equal(held[i][name], value, err_msg=name)
        batch, expected_batch = collate([held[i] for i in range(len(held))]), collate(list(rows))
        for name, value in expected_batch.items():
            assert batch[name].dtype == value.dtype and torch.equal(batch[name].nan_to_num(), value.nan_to_num()), name


def test_collator_finds_specials_by_position_not_by_id():
    collate = PretrainingCollator(pad_token_id=0)
    rows = [
        {"input_ids": np.array([2, 9, 3, 8, 3]), "token_type_ids": np.array([0, 0, 0, 1, 1])},
        {"input_ids": np.array([2, 3, 3]), "token_type_ids": np.array([0, 0, 0])},  # literal [SEP] text token
    ]
    batch = collate(rows)
    assert batch["input_ids"].tolist() == [[2, 9, 3, 8, 3], [2, 3, 3, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["special_tokens_mask"].tolist() == [[True, False, True, False, True], [True, False, True, True, True]]


def test_collator_pads_to_a_fixed_length_when_asked():
    rows = [{"input_ids": np.array([2, 9, 3]), "token_type_ids": np.array([0, 0, 0])}]
    batch = PretrainingCollator(pad_token_id=0, pad_to_length=5)(rows)
    assert batch["input_ids"].tolist() == [[2, 9, 3, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0]]
    assert batch["special_tokens_mask"].tolist() == [[True, False, True, True, True]]


def random_lengths(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, 120, size=count)


def test_length_grouped_sampler_is_seeded_covers_every_row_and_groups_lengths():
    lengths = random_lengths(1003)
    sampler = LengthGroupedSampler(lengths, 16, seed=3, mega_batch_factor=8)
    first = [batch.tolist() for batch in sampler.epoch_batches()]
    again = [batch.tolist() for batch in LengthGroupedSampler(lengths, 16, seed=3, mega_batch_factor=8).epoch_batches()]
    assert first == again
    sampler.set_epoch(1)
    second_epoch = [batch.tolist() for batch in sampler.epoch_batches()]
    assert second_epoch != first
    other_seed = LengthGroupedSampler(lengths, 16, seed=4, mega_batch_factor=8).epoch_batches()
    assert [batch.tolist() for batch in other_seed] != first
    for batches in (first, second_epoch):
        assert sorted(index for batch in batches for index in batch) == list(range(1003))
        assert [len(batch) for batch in batches] == [16] * 62 + [11]  # only the last batch is short
    # A DataLoader with the same batch size cuts the flat order back into exactly these batches.
    loader = DataLoader(np.arange(1003), batch_size=16, sampler=sampler)
    assert [batch.tolist() for batch in loader] == second_epoch
    assert len(loader) == len(second_epoch)
    random_batches = np.array_split(np.random.default_rng(0).permutation(1003), range(16, 1003, 16))
    assert padding_efficiency(lengths, first) > 0.85 > padding_efficiency(lengths, random_batches) + 0.2


def test_length_grouped_sampler_shards_batches_across_ranks():
    lengths = random_lengths(203)
    reference = LengthGroupedSampler(lengths, 8, seed=1, epoch=2)
    global_batches = [batch.tolist() for batch in reference.global_batches()]  # 26 batches, the last of 3 rows
    samplers = [LengthGroupedSampler(lengths, 8, seed=1, epoch=2, num_replicas=3, rank=rank) for rank in range(3)]
    shards = [[batch.tolist() for batch in sampler.epoch_batches()] for sampler in samplers]
    assert [len(shard) for shard in shards] == [9, 9, 9]  # padded with one repeated batch
    interleaved = [shard[step] for step in range(9) for shard in shards]
    assert interleaved == global_batches[:25] + [global_batches[0], global_batches[25]]
    assert sorted(index for shard in shards for batch in shard for index in batch) == sorted(
        list(range(203)) + global_batches[0]
    )
    assert shards[2][-1] == global_batches[-1]  # the short batch is its rank's last
    assert len(LengthGroupedSampler(lengths, 8, num_replicas=3, rank=2)) == 8 * 8 + 3
    with pytest.raises(ConfigError, match=r"rank=2: must be in \[0, num_replicas=2\)"):
        LengthGroupedSampler(lengths, 8, num_replicas=2, rank=2)


def test_length_grouped_sampler_resumes_mid_epoch():
    lengths = random_lengths(300)
    sampler = LengthGroupedSampler(lengths, 10, seed=5)
    sampler.set_epoch(4)
    expected = [batch.tolist() for batch in sampler.epoch_batches()]
    iterator = iter(DataLoader(np.arange(300), batch_size=10, sampler=sampler))
    consumed = [next(iterator).tolist() for _ in range(7)]
    state = sampler.state_dict()
    assert (state["epoch"], state["batches_yielded"]) == (4, 7)

    resumed = LengthGroupedSampler(lengths, 10, seed=5)
    resumed.load_state_dict(state)
    assert resumed.state_dict()["batches_yielded"] == 7
    rest = [batch.tolist() for batch in DataLoader(np.arange(300), batch_size=10, sampler=resumed)]
    assert consumed + rest == expected
    assert resumed.state_dict()["batches_yielded"] == 30
    assert len([*resumed]) == 300  # the skip applies to the resumed iteration only

    moved_on = LengthGroupedSampler(lengths, 10, seed=5)
    moved_on.load_state_dict(state)
    moved_on.set_epoch(5)
    assert len([*moved_on]) == 300
    with pytest.raises(ConfigError, match="batch_size 10 -> 20"):
        LengthGroupedSampler(lengths, 20, seed=5).load_state_dict(state)
