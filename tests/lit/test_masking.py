from __future__ import annotations

import pytest
import torch

from bertlab.lit.masking import fixed_mask, mask_tokens, masking_generator, predictions_per_row
from bertlab.losses import IGNORE_INDEX

VOCAB_SIZE = 1000
MASK_ID = 4
SPECIAL_IDS = (0, 1, 2, 3)  # pad, unk, cls, sep; 4 is [MASK]


def make_batch(rows: int = 64, length: int = 256, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ordinary tokens with [CLS] first, [SEP] in the middle and at the end, padding in odd rows."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB_SIZE, (rows, length), generator=generator)
    input_ids[:, 0] = 2
    input_ids[:, length // 2] = 3
    input_ids[:, -1] = 3
    input_ids[1::2, -length // 4 :] = 0
    return input_ids, torch.isin(input_ids, torch.tensor(SPECIAL_IDS))


def run(input_ids, special, seed=0, **options):
    options = {"vocab_size": VOCAB_SIZE, "mask_token_id": MASK_ID, "special_token_ids": SPECIAL_IDS, **options}
    return mask_tokens(input_ids, special, generator=torch.Generator().manual_seed(seed), **options)


def test_masking_rate_and_80_10_10_split():
    input_ids, special = make_batch()
    masked, labels = run(input_ids, special)
    chosen = labels != IGNORE_INDEX
    assert chosen.sum() / (~special).sum() == pytest.approx(0.15, abs=0.01)
    assert torch.equal(labels[chosen], input_ids[chosen])
    assert torch.equal(masked[~chosen], input_ids[~chosen])
    num_chosen = chosen.sum()
    became_mask = (masked[chosen] == MASK_ID).sum() / num_chosen
    kept = (masked[chosen] == input_ids[chosen]).sum() / num_chosen
    randomised = 1 - became_mask - kept
    assert became_mask == pytest.approx(0.8, abs=0.02)
    assert kept == pytest.approx(0.1, abs=0.02)
    assert randomised == pytest.approx(0.1, abs=0.02)


def test_specials_and_padding_are_never_masked():
    input_ids, special = make_batch()
    masked, labels = run(input_ids, special, mlm_probability=0.9)
    assert (labels[special] == IGNORE_INDEX).all()
    assert torch.equal(masked[special], input_ids[special])


def test_split_is_configurable():
    input_ids, special = make_batch(rows=8)
    all_mask, labels = run(input_ids, special, mask_replace_prob=1.0, random_replace_prob=0.0)
    assert (all_mask[labels != IGNORE_INDEX] == MASK_ID).all()
    unchanged, labels = run(input_ids, special, mask_replace_prob=0.0, random_replace_prob=0.0)
    assert torch.equal(unchanged, input_ids) and (labels != IGNORE_INDEX).any()


def test_random_replacements_avoid_special_ids_and_cover_the_rest():
    vocab_size = 8  # tiny, so special ids would be drawn often if they were allowed
    input_ids = torch.full((64, 128), 5)
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    masked, labels = run(
        input_ids, special, vocab_size=vocab_size, mlm_probability=1.0, mask_replace_prob=0.0, random_replace_prob=1.0
    )
    assert (labels == 5).all()
    assert set(masked.unique().tolist()) == {5, 6, 7}


def test_same_generator_seed_same_output_and_other_seed_differs():
    input_ids, special = make_batch(rows=8)
    first, second, other = run(input_ids, special, seed=3), run(input_ids, special, seed=3), run(input_ids, special, seed=4)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert not torch.equal(first[1], other[1])


def test_whole_word_masking_masks_whole_words():
    input_ids, special = make_batch()
    # Words of adjacent tokens (a new word at 40% of positions and after specials), numbered
    # uniquely across rows; -1 for specials.
    starts = (torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(1)) < 0.4) | special
    starts[:, 1:] |= special[:, :-1]
    word_ids = starts.cumsum(dim=1) + torch.arange(input_ids.shape[0])[:, None] * input_ids.shape[1]
    word_ids[special] = -1
    assert (word_ids[:, 1:] == word_ids[:, :-1]).any(), "the test needs multi-token words"
    masked, labels = run(input_ids, special, word_ids=word_ids)
    chosen = labels != IGNORE_INDEX
    assert not chosen[special].any()
    ordinary = word_ids >= 0
    for state in (True, False):
        words_with_state = word_ids[ordinary & (chosen == state)].unique()
        words_with_other_state = word_ids[ordinary & (chosen != state)].unique()
        assert not torch.isin(words_with_state, words_with_other_state).any(), "a word was split by masking"
    chosen_words = word_ids[chosen].unique().numel()
    assert chosen_words / word_ids[ordinary].unique().numel() == pytest.approx(0.15, abs=0.015)
    assert torch.equal(masked[~chosen], input_ids[~chosen])


def test_masking_generator_depends_only_on_seed_and_position():
    def draws(*key):
        return torch.rand(5, generator=masking_generator(*key))

    assert torch.equal(draws(7, 0, 3, 1), draws(7, 0, 3, 1))
    assert not torch.equal(draws(7, 0, 3, 1), draws(7, 0, 4, 1))
    assert not torch.equal(draws(7, 0, 3, 1), draws(7, 0, 3, 0))
    assert not torch.equal(draws(7, 0, 3, 1), draws(8, 0, 3, 1))


def test_static_masking_chooses_round_p_of_each_rows_maskable_tokens():
    input_ids, special = make_batch()
    masked, labels = run(input_ids, special, static=True)
    chosen = labels != IGNORE_INDEX
    expected = ((~special).sum(dim=1).double() * 0.15).round().long()
    assert torch.equal(chosen.sum(dim=1), expected)  # 38 in full rows, 28 in padded ones
    assert chosen.sum(dim=1).max() <= predictions_per_row(input_ids.shape[1], 0.15)
    assert not chosen[special].any()
    assert torch.equal(labels[chosen], input_ids[chosen])
    assert (masked[chosen] == MASK_ID).float().mean() == pytest.approx(0.8, abs=0.03)


def test_static_masking_is_uniform_over_a_rows_positions():
    input_ids, special = make_batch(rows=1024, length=64)
    _, labels = run(input_ids, special, static=True)
    full_rows = (labels != IGNORE_INDEX)[0::2]
    frequency = full_rows.float().mean(dim=0)[~special[0]]
    assert frequency.min() > 0.15 - 0.06 and frequency.max() < 0.15 + 0.06


def test_static_whole_word_masking_takes_whole_words_within_each_rows_budget():
    input_ids, special = make_batch(rows=64, length=128)
    starts_word = torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(1)) < 0.6
    word_ids = torch.cumsum(starts_word | special, dim=1)
    word_ids[special] = -1
    _, labels = run(input_ids, special, static=True, word_ids=word_ids)
    chosen = labels != IGNORE_INDEX
    budgets = ((~special).sum(dim=1).double() * 0.15).round().long()
    assert (chosen.sum(dim=1) <= budgets).all() and chosen.sum() > 0.8 * budgets.sum()
    for row_chosen, row_words in zip(chosen, word_ids):
        for word in row_words[row_chosen].unique():
            assert row_chosen[row_words == word].all()


def test_static_masking_is_reproducible_from_the_generator_seed():
    input_ids, special = make_batch(rows=8)
    first, second = run(input_ids, special, seed=3, static=True), run(input_ids, special, seed=3, static=True)
    other = run(input_ids, special, seed=4, static=True)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert not torch.equal(first[1], other[1])


def fixed(input_ids, special, **options):
    return fixed_mask(input_ids, input_ids != 0, special, mask_token_id=MASK_ID, excluded_ids=(1, *SPECIAL_IDS),
                      **options)


def test_fixed_mask_puts_mask_on_exactly_15_percent_of_each_rows_ordinary_tokens():
    input_ids, special = make_batch()
    input_ids[:, 5] = 1  # [UNK]: text, but never a target of the plain-text measure
    masked, labels = fixed(input_ids, special)
    chosen = labels != IGNORE_INDEX
    ordinary = ~special & (input_ids != 1)
    assert torch.equal(chosen.sum(dim=1), (ordinary.sum(dim=1) * 0.15).round().long())
    assert not (chosen & ~ordinary).any()
    assert torch.equal(labels[chosen], input_ids[chosen]) and (masked[chosen] == MASK_ID).all()
    assert torch.equal(masked[~chosen], input_ids[~chosen])


def test_fixed_mask_depends_on_each_rows_tokens_alone():
    input_ids, special = make_batch(rows=8)
    _, labels = fixed(input_ids, special)
    # The same rows in another order, padded to a longer batch beside another row: the same positions.
    order = torch.tensor([3, 0, 7, 1, 2, 6, 5, 4])
    longer, longer_special = make_batch(rows=9, length=300, seed=1)
    longer[:8] = 0
    longer[:8, :256], longer_special[:8] = input_ids[order], True
    longer_special[:8, :256] = special[order]
    _, longer_labels = fixed(longer, longer_special)
    assert torch.equal(longer_labels[:8, :256], labels[order])
    assert (longer_labels[:8, 256:] == IGNORE_INDEX).all()
    # One token changed draws that row anew; another seed draws every row anew.
    changed = input_ids.clone()
    changed[0, 1] = 999 if changed[0, 1] != 999 else 998
    _, changed_labels = fixed(changed, special)
    assert torch.equal(changed_labels[1:], labels[1:]) and not torch.equal(changed_labels[0] != -100, labels[0] != -100)
    assert not torch.equal(fixed(input_ids, special, seed=16)[1] != -100, labels != -100)
