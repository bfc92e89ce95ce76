"""BERT's masked-language-model corruption, as a pure function of the batch and a random generator,
and the generator seeded by a batch's place in the run.

It runs inside the training step (bertlab.lit.pretraining), so a (seed, step)-seeded generator makes
masking reproducible and resumable without any state in the data pipeline.

Static masking chooses an exact number of tokens per row instead of drawing each by chance, so that
the model's sparse prediction head can work on a shape fixed by the batch's shape (torch.compile
then compiles it once); see `mask_tokens` and `bertlab.losses.labelled_masked_lm`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bertlab.lit.throughput import expected_masked_positions
from bertlab.losses import IGNORE_INDEX


def masking_generator(seed: int, *stream: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator seeded from `seed` and the integers naming one batch's place in the run.
    SeedSequence mixes them, so neighbouring steps get unrelated streams. The draws are reproducible
    per device type (CPU and CUDA generators are different algorithms)."""
    mixed = np.random.SeedSequence([seed, *stream]).generate_state(1, dtype=np.uint64)[0]
    generator = torch.Generator(device=device)
    generator.manual_seed(int(mixed))
    return generator


def predictions_per_row(length: int, mlm_probability: float) -> int:
    """The most tokens static masking chooses in a row of `length` tokens: the width of the model's
    static sparse prediction (`predictions_per_row` of `bertlab.losses.labelled_masked_lm`)."""
    return round(mlm_probability * length)


def predicted_per_batch(batch_size: int, length: int, mlm_probability: float, static: bool) -> float:
    """Positions the sparse MLM head predicts in a batch: the static block, else the expected count of
    masked tokens ([CLS] and [SEP] are never masked; counting the real ones would wait for the device)."""
    if static:
        return batch_size * predictions_per_row(length, mlm_probability)
    return expected_masked_positions(batch_size, length - 2, mlm_probability)


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    *,
    vocab_size: int,
    mask_token_id: int,
    generator: torch.Generator,
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    word_ids: torch.Tensor | None = None,
    special_token_ids: Sequence[int] = (),
    static: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose tokens to predict and corrupt them; returns (masked_input_ids, labels).

    Each non-special token (or, with `word_ids`, each whole word) is chosen with `mlm_probability`.
    A chosen token becomes [MASK] with `mask_replace_prob`, a random token with
    `random_replace_prob` (the two add up to at most 1: PretrainingModule checks them), and stays as it
    is otherwise. Random tokens are never `mask_token_id` nor one of `special_token_ids`. `labels` holds
    the original id at chosen positions and -100 elsewhere.
    `word_ids` gives each token's word (-1 for specials); a word's tokens must be adjacent, as the
    pretraining collator makes them.

    `static` chooses exactly round(mlm_probability × n) tokens in a row of n maskable tokens, uniformly
    without replacement, instead of each by chance. The count follows each row's own length, not the
    padded length (cramming's fixed count per row assumes packed rows without padding; here a short
    row would lose most of its tokens), so the masking rate stays `mlm_probability` everywhere, while
    no row of length L gets more than `predictions_per_row(L, mlm_probability)`: the model can predict
    a [rows, that many] block whatever the batch's text. With `word_ids` the count is a budget of
    tokens filled by whole words in random order; the first word that does not fit ends the row's
    choice, so a row gets a little less than its budget on average.
    """
    device = input_ids.device
    maskable = ~special_tokens_mask.bool()
    draws = torch.rand(input_ids.shape, generator=generator, device=device)
    if word_ids is not None:
        maskable &= word_ids >= 0
        draws = draws.gather(1, _word_start_positions(word_ids))
    if static:
        positions = torch.arange(input_ids.shape[1], device=device).expand_as(input_ids)
        groups = positions if word_ids is None else word_ids
        budgets = (maskable.sum(dim=1).double() * mlm_probability).round()
        # Unmaskable tokens sort after every draw in [0, 1), beyond any budget.
        chosen = _first_groups_within_budget(draws.masked_fill(~maskable, 2.0), groups, budgets)
    else:
        chosen = maskable & (draws < mlm_probability)
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))

    replacement_draws = torch.rand(input_ids.shape, generator=generator, device=device)
    to_mask = chosen & (replacement_draws < mask_replace_prob)
    to_randomise = chosen & ~to_mask & (replacement_draws < mask_replace_prob + random_replace_prob)
    random_tokens = _random_tokens_except(
        input_ids.shape, vocab_size, (mask_token_id, *special_token_ids), generator, device
    )
    masked_input_ids = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    masked_input_ids = torch.where(to_randomise, random_tokens.to(input_ids.dtype), masked_input_ids)
    return masked_input_ids, labels


def _first_groups_within_budget(draws: torch.Tensor, groups: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor:
    """Per row, the groups (runs of adjacent equal `groups` ids) in increasing order of their `draws`,
    taken while their tokens fit the row's budget. A group's tokens share one draw, and a stable sort
    breaks ties by position, so each group stays one run in the sorted order."""
    order = draws.argsort(dim=1, stable=True)
    sorted_groups = groups.gather(1, order)
    ends_group = torch.ones_like(order, dtype=torch.bool)
    ends_group[:, :-1] = sorted_groups[:, 1:] != sorted_groups[:, :-1]
    slots = torch.arange(order.shape[1], device=order.device).expand_as(order)
    group_end_slot = torch.where(ends_group, slots, order.shape[1]).flip(1).cummin(dim=1).values.flip(1)
    fits = group_end_slot < budgets[:, None]
    return torch.zeros_like(fits).scatter(1, order, fits)


def _word_start_positions(word_ids: torch.Tensor) -> torch.Tensor:
    """For every position, the position of the first token of its word (adjacent equal ids = one word)."""
    positions = torch.arange(word_ids.shape[1], device=word_ids.device).expand_as(word_ids)
    starts = torch.ones_like(word_ids, dtype=torch.bool)
    starts[:, 1:] = word_ids[:, 1:] != word_ids[:, :-1]
    return torch.where(starts, positions, torch.zeros_like(positions)).cummax(dim=1).values


def _random_tokens_except(
    shape: torch.Size, vocab_size: int, excluded: Sequence[int], generator: torch.Generator, device: torch.device
) -> torch.Tensor:
    """Uniform ids from [0, vocab_size) minus `excluded`: draw from a shorter range, then step over
    each excluded id, in increasing order."""
    excluded_sorted = sorted({token for token in excluded if 0 <= token < vocab_size})
    tokens = torch.randint(vocab_size - len(excluded_sorted), shape, generator=generator, device=device)
    for token in excluded_sorted:
        tokens += tokens >= token
    return tokens


# The plain-text measure's corruption (`fixed_mask`): a constant of the project, like the seed of its positions.
FIXED_MASK_PROBABILITY = 0.15
FIXED_MASK_SEED = 15


def fixed_mask(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_tokens_mask: torch.Tensor, *,
               mask_token_id: int, excluded_ids: Sequence[int] = (), probability: float = FIXED_MASK_PROBABILITY,
               seed: int = FIXED_MASK_SEED) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain-text measure's corruption; returns (masked_input_ids, labels) as `mask_tokens` does.

    In each row, exactly round(`probability` × n) of its n maskable tokens (neither special by
    `special_tokens_mask` nor one of `excluded_ids`, e.g. [UNK]) all become [MASK]. The positions are drawn
    from `seed` and the row's own tokens (those of `attention_mask`) alone: a sequence is masked the same
    way at every evaluation, in any batch, on any device, whatever the run's seed and masking settings.
    """
    rows = input_ids.cpu().numpy()
    real = attention_mask.cpu().numpy().astype(bool)
    maskable = real & ~special_tokens_mask.cpu().numpy().astype(bool) & ~np.isin(rows, list(excluded_ids))
    chosen = np.zeros_like(maskable)
    for row, (ids, is_real, can_mask) in enumerate(zip(rows, real, maskable)):
        draws = np.random.default_rng([seed, *ids[is_real].tolist()]).random(len(ids))
        candidates = np.flatnonzero(can_mask)
        count = round(probability * len(candidates))
        chosen[row, candidates[np.argsort(draws[candidates], kind="stable")[:count]]] = True
    chosen = torch.from_numpy(chosen).to(input_ids.device)
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return torch.where(chosen, torch.full_like(input_ids, mask_token_id), input_ids), labels
