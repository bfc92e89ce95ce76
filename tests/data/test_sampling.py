"""Orders in which to visit a split (bertlab.data.sampling): the length-grouped sampler is seeded, covers every
row, groups lengths, shards its batches across ranks and resumes mid-epoch."""

from __future__ import annotations

import numpy as np
import pytest
from torch.utils.data import DataLoader

from bertlab.data.sampling import LengthGroupedSampler, padding_efficiency
from bertlab.errors import ConfigError


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
