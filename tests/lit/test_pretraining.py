"""PretrainingModule (bertlab.lit.pretraining) on a tiny BERT and in-memory batches: learning, the
unigram output bias, pretraining dropout, NSP, exact resume, reloading and static masking (compiled)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from lightning.pytorch import Callback

from bertlab.lit.run_artifacts import MetricsArtifacts
from bertlab.lit.masking import FIXED_MASK_PROBABILITY, fixed_mask, mask_tokens, masking_generator, predictions_per_row
from bertlab.errors import ConfigError, DataError
from bertlab.lit.pretraining import PretrainingModule
from bertlab.lit.throughput import mlm_forward_flops
from bertlab.model import BertForMaskedLM
from tests.lit.helpers import (VOCAB, fit_straight_and_resumed, loader, model_weights, pretraining_batch,
                               pretraining_module, small_config, trainer)


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging


def test_the_shares_of_a_chosen_token_add_up_to_at_most_one():
    with pytest.raises(ConfigError, match=r"mask_replace_prob \+ random_replace_prob must be at most 1 \(a chosen "
                                          r"token is masked, replaced or kept\), got 0.8 \+ 0.3"):
        pretraining_module(mask_replace_prob=0.8, random_replace_prob=0.3)


def test_a_sampled_softmax_trains_masked_lm_alone():
    with pytest.raises(ConfigError, match=r"^task.softmax_samples=64 with task.nsp=true: the sampled softmax trains "
                                          r"masked LM alone; set task.softmax_samples=null or task.nsp=false$"):
        pretraining_module(softmax_samples=64, nsp=True)
    pretraining_module(softmax_samples=64)
    pretraining_module(nsp=True)


@pytest.mark.slow
def test_pretraining_learns_a_memorisable_batch_and_logs_artifacts(tmp_path):
    torch.manual_seed(0)  # the initial weights: this test's outcome must not hang on the tests run before it
    module = pretraining_module()
    batch = pretraining_batch()
    run = trainer(tmp_path, max_steps=200, log_every_n_steps=10, val_check_interval=100,
                  callbacks=[MetricsArtifacts()])
    before = run.validate(module, loader([batch]), verbose=False)[0]
    run.fit(module, loader([batch] * 200), loader([batch]))
    after = run.validate(module, loader([batch]), verbose=False)[0]

    assert after["val/loss"] < before["val/loss"] - 3.0
    assert after["val/perplexity"] == pytest.approx(math.exp(after["val/loss"]), rel=1e-4)
    assert after["val/accuracy"] > max(0.5, before["val/accuracy"])
    assert run.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-6)  # decayed to zero

    log_dir = tmp_path / "logs" / "lightning_logs" / "version_0"
    summary = json.loads((log_dir / "metrics.json").read_text())  # rewritten by the last validate
    assert summary["step"] == 200
    assert summary["final"]["val/loss"] == pytest.approx(after["val/loss"])
    assert summary["best"]["val/loss"]["value"] == pytest.approx(after["val/loss"])
    assert "train/loss" in summary["final"] and "val/perplexity" in summary["best"]
    png = (log_dir / "metrics.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_validation_sets_given_as_a_dict_are_logged_each_under_its_own_name_and_labelled(tmp_path):
    torch.manual_seed(0)
    module = pretraining_module()
    training_style, plain = pretraining_batch(), padded_batch([16, 12, 9, 16, 5, 16, 14, 10])
    run = trainer(tmp_path, max_steps=4, val_check_interval=2, callbacks=[MetricsArtifacts()])
    run.fit(module, loader([training_style] * 4), {"val": loader([training_style]), "val_text": loader([plain])})
    logged = run.callback_metrics
    expected = {f"{name}/{metric}" for name in ("val", "val_text") for metric in ("loss", "perplexity", "accuracy")}
    assert expected <= set(logged) and not any("dataloader_idx" in name for name in logged)
    assert logged["val_text/perplexity"] == pytest.approx(math.exp(logged["val_text/loss"]), rel=1e-4)
    assert logged["val/loss"] != logged["val_text/loss"]
    # Each set's metrics are its own batches' alone: the first set, validated by itself, gives the same.
    alone = trainer(tmp_path / "alone", max_steps=1).validate(module, loader([training_style]), verbose=False)[0]
    assert alone["val/loss"] == pytest.approx(float(logged["val/loss"]))
    assert alone["val/accuracy"] == pytest.approx(float(logged["val/accuracy"]))
    assert not any(name.startswith("val_text/") for name in alone)

    summary = json.loads((tmp_path / "logs" / "lightning_logs" / "version_0" / "metrics.json").read_text())
    assert {"val/loss", "val_text/loss"} <= set(summary["best"])
    assert summary["validation_sets"] == {"val": "held-out, built like training",
                                          "val_text": "held-out plain text"}


def test_unigram_output_bias_starts_the_loss_at_the_unigram_entropy():
    batch = pretraining_batch()
    counts = torch.bincount(batch["input_ids"].flatten(), minlength=VOCAB).numpy()
    module = pretraining_module(special_token_ids=[2, 3])
    module.init_output_bias(counts)
    bias = module.model.cls.predictions.bias.detach().double()
    smoothed = torch.as_tensor(counts, dtype=torch.float64) + 1
    smoothed[[2, 3]] = 1  # [CLS] and [SEP] are never predicted
    assert torch.allclose(bias.exp().sum(), torch.tensor(1.0, dtype=torch.float64))
    assert torch.allclose(bias, (smoothed / smoothed.sum()).log(), atol=1e-6)
    # The first loss is about the targets' entropy under those frequencies, not log(vocab size).
    module.eval()
    output, labels = module._masked_forward(batch, masking_generator(0, 0), return_logits=True)
    unigram = -bias[labels[labels != -100]].mean().item()
    assert output.loss.item() == pytest.approx(unigram, abs=0.2)
    assert abs(output.loss.item() - math.log(VOCAB)) > 1.0
    with pytest.raises(DataError, match="token counts"):
        module.init_output_bias(counts[:-1])


def word_rows(words: list[int], length: int = 16) -> dict[str, torch.Tensor]:
    """A batch of `[CLS] w w … w [SEP]` rows, one per word of `words`."""
    ids = torch.tensor(words)[:, None].repeat(1, length)
    ids[:, 0], ids[:, -1] = 2, 3
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
            "special_tokens_mask": special}


def test_the_plain_text_measure_scores_the_unigram_model_at_the_same_positions(tmp_path):
    """A vocabulary of three words (5, 6, 7) beside the specials 0–4; the training counts 6, 3 and 1 (the
    specials' counts are left out), add-one smoothed over the 8 ids: p = 7/18, 4/18 and 2/18. Each row of 14
    words has round(0.15 × 14) = 2 masked: 4 rows of 5, 3 of 6 and 1 of 7 give 8, 6 and 2 targets."""
    module = pretraining_module(config=small_config(vocab_size=8), special_token_ids=[0, 1, 2, 3, 4])
    module.set_unigram([0, 0, 9, 9, 0, 6, 3, 1])
    run = trainer(tmp_path, max_steps=1, callbacks=[MetricsArtifacts()])
    logged = run.validate(module, loader([word_rows([5, 5, 6, 5, 7, 6, 5, 6])]), verbose=False)[0]
    expected = (18 / 7) ** (8 / 16) * (18 / 4) ** (6 / 16) * (18 / 2) ** (2 / 16)
    assert logged["text/unigram_perplexity"] == pytest.approx(expected, rel=1e-5)
    assert logged["text/perplexity"] == pytest.approx(math.exp(logged["text/loss"]), rel=1e-5)
    assert logged["text/perplexity_ratio"] == pytest.approx(logged["text/perplexity"] / expected, rel=1e-5)
    summary = json.loads((tmp_path / "logs" / "lightning_logs" / "version_0" / "metrics.json").read_text())
    for name in ("text/perplexity", "text/unigram_perplexity", "text/perplexity_ratio"):
        assert summary["final"][name] == pytest.approx(logged[name]) and name in summary["best"]


def test_the_plain_text_measure_masks_the_same_positions_at_every_validation_and_whatever_the_runs_masking(
        tmp_path, monkeypatch):
    masks = []

    def recording_fixed_mask(*args, **kwargs):
        masked, labels = fixed_mask(*args, **kwargs)
        masks.append(labels != -100)
        return masked, labels

    monkeypatch.setattr("bertlab.lit.pretraining.fixed_mask", recording_fixed_mask)
    batches = loader([pretraining_batch(), padded_batch([16, 12, 9, 16, 5, 16, 14, 10])])
    figures = []
    for options in ({"seed": 7}, {"seed": 7}, {"seed": 8, "mlm_probability": 0.2, "mask_replace_prob": 0.5},
                    {"seed": 9, "static_masking": True}):
        torch.manual_seed(0)  # the same weights
        module = pretraining_module(**options)
        module.set_unigram(torch.bincount(pretraining_batch()["input_ids"].flatten(), minlength=VOCAB).numpy())
        figures.append(trainer(tmp_path, max_steps=1, logger=False).validate(module, batches, verbose=False)[0])
    assert len(masks) == 8
    assert all(torch.equal(mask, expected) for mask, expected in zip(masks, masks[:2] * 4))
    text = [{key: value for key, value in logged.items() if key.startswith("text/")} for logged in figures]
    assert set(text[0]) == {f"text/{name}" for name in ("loss", "perplexity", "accuracy", "unigram_perplexity",
                                                         "perplexity_ratio")}
    assert text[1] == text[0]
    for other in text[2:]:
        assert other == pytest.approx(text[0], rel=1e-5)
    assert figures[2]["val/loss"] != figures[0]["val/loss"]  # the run's own masks follow its seed


def test_only_the_plain_text_set_is_measured_beside_copied_pairs(tmp_path):
    module = pretraining_module()
    copied, plain = pretraining_batch(), padded_batch([16, 12, 9, 16, 5, 16, 14, 10])
    both = trainer(tmp_path, max_steps=1, logger=False).validate(
        module, {"val": loader([copied]), "val_text": loader([plain])}, verbose=False)[0]
    alone = trainer(tmp_path, max_steps=1, logger=False).validate(module, loader([plain]), verbose=False)[0]
    assert both["text/loss"] == pytest.approx(alone["text/loss"])
    assert "text/perplexity_ratio" not in alone  # no unigram model given


def test_pretraining_dropout_holds_for_the_run_and_the_checkpoint_keeps_the_models(tmp_path):
    config = small_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    batch = pretraining_batch()

    def two_training_forwards(model):
        return [model.train()(batch["input_ids"], batch["attention_mask"]).logits for _ in range(2)]

    module = pretraining_module(config=config, dropout=0.0)
    assert torch.equal(*two_training_forwards(module.model))
    assert module.model.config.hidden_dropout_prob == 0.3
    module.model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["attention_probs_dropout_prob"] == 0.3
    assert not torch.equal(*two_training_forwards(BertForMaskedLM.from_pretrained(tmp_path)))


def test_pretraining_with_next_sentence_prediction_logs_its_losses_and_accuracy(tmp_path):
    module = pretraining_module(nsp=True)
    batch = pretraining_batch(nsp=True)
    run = trainer(tmp_path, max_steps=2, log_every_n_steps=1)
    run.fit(module, loader([batch] * 2), loader([batch]))
    assert {"train/loss", "train/mlm_loss", "train/nsp_loss", "val/nsp_accuracy"} <= set(run.logged_metrics)
    logged = run.logged_metrics
    assert logged["train/loss"] == pytest.approx(logged["train/mlm_loss"] + logged["train/nsp_loss"])
    with pytest.raises(DataError, match="next_sentence_label"):
        run.validate(module, loader([pretraining_batch()]), verbose=False)




def test_resumed_pretraining_masks_and_trains_exactly_like_an_uninterrupted_run(tmp_path, monkeypatch):
    masks: list[torch.Tensor] = []

    def recording_mask_tokens(*args, **kwargs):
        masked, labels = mask_tokens(*args, **kwargs)
        masks.append(labels != -100)
        return masked, labels

    monkeypatch.setattr("bertlab.lit.pretraining.mask_tokens", recording_mask_tokens)
    no_dropout = small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    data = loader([pretraining_batch()] * 8)
    common = dict(accumulate_grad_batches=2, logger=False)

    straight, resumed = fit_straight_and_resumed(lambda: pretraining_module(config=no_dropout), data, tmp_path,
                                                 **common)
    straight_masks, halves_masks = masks[:8], masks[8:]

    # 4 optimizer steps x 2 micro-batches, each masked differently; the two halves repeat them all.
    assert len(straight_masks) == 8
    assert len({tuple(mask.flatten().tolist()) for mask in straight_masks}) == 8
    assert all(torch.equal(a, b) for a, b in zip(halves_masks, straight_masks, strict=True))
    expected = model_weights(straight)
    assert all(torch.equal(expected[key], value) for key, value in model_weights(resumed).items())

    torch.manual_seed(0)
    other_seed = pretraining_module(config=no_dropout, seed=8)
    trainer(tmp_path, max_steps=4, **common).fit(other_seed, data)
    assert not all(torch.equal(expected[key], value) for key, value in model_weights(other_seed).items())


def test_pretraining_checkpoint_reloads_with_its_hyperparameters(tmp_path):
    module = pretraining_module(special_token_ids=[0, 1, 2, 3])
    run = trainer(tmp_path, max_steps=1, logger=False)
    run.fit(module, loader([pretraining_batch()]))
    run.save_checkpoint(tmp_path / "model.ckpt")
    reloaded = PretrainingModule.load_from_checkpoint(tmp_path / "model.ckpt", weights_only=True)
    assert reloaded.hparams.seed == 7 and reloaded.hparams.special_token_ids == [0, 1, 2, 3]
    assert reloaded.model.config.to_dict() == module.model.config.to_dict()
    assert all(torch.equal(value, model_weights(module)[key]) for key, value in model_weights(reloaded).items())


def padded_batch(lengths: list[int]) -> dict[str, torch.Tensor]:
    """`pretraining_batch` with row r ending (its [SEP], then padding) at lengths[r]."""
    batch = pretraining_batch()
    for row, length in enumerate(lengths):
        batch["input_ids"][row, length - 1], batch["input_ids"][row, length:] = 3, 0
        batch["attention_mask"][row, length:] = 0
        batch["special_tokens_mask"][row, length - 1:] = True
    return batch


def test_static_masking_predicts_a_fixed_block_and_validates_as_the_masked_positions_alone(tmp_path, monkeypatch):
    module = pretraining_module(static_masking=True)
    blocks = []
    module.model.cls.predictions.transform.register_forward_hook(lambda m, args, out: blocks.append(args[0].shape))
    batches = [pretraining_batch(), padded_batch([16, 12, 9, 16, 5, 16, 14, 10])]
    run = trainer(tmp_path, max_steps=2, log_every_n_steps=1)
    run.fit(module, loader(batches), loader(batches))
    per_row = predictions_per_row(16, 0.3)
    # The plain-text measure's block is of its own rate, 15%.
    assert set(blocks) == {(8 * per_row, 32), (8 * predictions_per_row(16, FIXED_MASK_PROBABILITY), 32)}
    assert module.forward_flops(8, 16) == mlm_forward_flops(module.model.config, 8, 16, 8 * per_row)

    static = run.validate(module, loader(batches), verbose=False)[0]
    monkeypatch.setattr(module, "_predictions_per_row", lambda length: None)  # the same masks, the masked rows only
    dynamic = run.validate(module, loader(batches), verbose=False)[0]
    assert static["val/loss"] == pytest.approx(dynamic["val/loss"], rel=1e-5)
    assert static["val/accuracy"] == dynamic["val/accuracy"]


def skip_without_a_compiler() -> None:
    try:
        torch.compile(lambda x: x * 2)(torch.ones(2))
    except Exception as error:  # inductor needs a C++ toolchain (and Python headers) on CPU
        pytest.skip(f"torch.compile cannot compile here: {type(error).__name__}: {error}".splitlines()[0])


@pytest.mark.slow
@pytest.mark.compile
def test_compiled_static_masking_compiles_once_across_batches_with_different_masked_counts(tmp_path):
    skip_without_a_compiler()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    graphs_after_each_step = []

    class CountGraphs(Callback):
        def on_train_batch_end(self, *args):
            graphs_after_each_step.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])

    row_lengths = ([16] * 8, [16, 12, 9, 16, 5, 16, 14, 10], [7] * 8, [13, 16] * 4)
    masked_counts = {sum(round(0.3 * (length - 2)) for length in lengths) for lengths in row_lengths}
    assert len(masked_counts) == len(row_lengths)
    module = pretraining_module(static_masking=True, compile=True)
    run = trainer(tmp_path, max_steps=4, logger=False, callbacks=[CountGraphs()])
    try:
        run.fit(module, loader([padded_batch(lengths) for lengths in row_lengths]))
    finally:
        torch._dynamo.reset()
    assert graphs_after_each_step[0] > 0
    assert graphs_after_each_step == graphs_after_each_step[:1] * 4
    assert math.isfinite(run.logged_metrics["train/loss"])


def test_a_batch_without_attention_mask_trains_as_one_whose_mask_is_all_ones(tmp_path):
    """Batches of packed text have no padding; without a mask, SDPA may use its flash kernels on a GPU."""
    initial, trained = {}, {}
    for masked in (True, False):
        torch.manual_seed(0)
        module = pretraining_module()
        batch = pretraining_batch()
        if not masked:
            del batch["attention_mask"]
        initial[masked] = model_weights(module)
        trainer(tmp_path / str(masked), max_steps=3).fit(module, loader([batch] * 3))
        trained[masked] = model_weights(module)
    name = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(trained[True][name], initial[True][name])
    for name, value in trained[True].items():
        torch.testing.assert_close(trained[False][name], value, msg=name)


def test_cuda_graph_replays_start_a_new_generation_at_each_batch(monkeypatch):
    """Under reduce-overhead the graphs' outputs are overwritten by the next replay: each training and
    validation batch tells torch so, and only then."""
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    batch = pretraining_batch()
    for compile_mode, expected in ((None, 0), ("default", 0), ("reduce-overhead", 2)):
        marks.clear()
        module = pretraining_module(compile=True, compile_mode=compile_mode)  # compiles at the first forward only
        module.on_train_batch_start(batch, 0)
        module.on_validation_batch_start(batch, 0)
        assert len(marks) == expected, compile_mode
