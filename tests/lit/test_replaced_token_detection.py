"""ELECTRA's replaced-token detection (bertlab.lit.replaced_token_detection, `train task=electra`): the
generator shares the discriminator's embeddings, samples replace the masked tokens only, training learns
to detect them, a resumed run ends as the uninterrupted one, and the run exports a BertModel that
transformers and `fine-tune` read."""

from __future__ import annotations

import functools
import json

import pytest
import torch
from safetensors.torch import load_file

from bertlab.errors import ConfigError
from bertlab.flops import encoder_forward_flops
from bertlab.lit.optim import warmup_schedule
from bertlab.lit.replaced_token_detection import ReplacedTokenDetectionModule, replace_masked
from bertlab.model import IGNORE_INDEX
from tests.bertlab_runs import fine_tuning, pretraining, run_in_process
from tests.lit.helpers import (MASK_ID, VOCAB, adamw, fit_straight_and_resumed, loader, pretraining_batch, tiny_config,
                               trainer)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging
NO_DROPOUT = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def electra_module(**kwargs) -> ReplacedTokenDetectionModule:
    options = dict(config=tiny_config(), mask_token_id=MASK_ID, optimizer=adamw(lr=1e-2),
                   scheduler=functools.partial(warmup_schedule, warmup_steps=3), mlm_probability=0.3, seed=7,
                   special_token_ids=[2, 3])
    return ReplacedTokenDetectionModule(**{**options, **kwargs})


def all_weights(module) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in module.state_dict().items()}


def test_the_generator_is_half_as_deep_and_reads_and_trains_the_discriminators_embeddings(tmp_path):
    module = electra_module()
    assert module.generator.config.num_hidden_layers == 1 and module.model.config.num_hidden_layers == 2
    assert module.generator.bert.embeddings is module.model.embeddings
    assert module.generator.cls.predictions.decoder_weight is module.model.embeddings.word_embeddings.weight
    run = trainer(tmp_path, max_steps=1, logger=False)
    run.fit(module, loader([pretraining_batch()]))
    optimizer = run.optimizers[0]
    trained = [parameter for group in optimizer.param_groups for parameter in group["params"]]
    assert len(trained) == len({id(parameter) for parameter in trained})  # the shared tables once
    assert sum(parameter.numel() for parameter in trained) == sum(
        parameter.numel() for parameter in module.parameters())
    assert electra_module(generator_layers=2).generator.config.num_hidden_layers == 2
    batch = pretraining_batch()  # 8 × 16
    deeper = electra_module(generator_layers=2)
    for counted in (module, deeper):
        counted.count_batch(batch)
    one_layer = encoder_forward_flops(tiny_config(num_hidden_layers=1), batch_size=8, length=16)
    assert deeper.eval().flops_per_batch - module.eval().flops_per_batch == pytest.approx(one_layer)
    own = electra_module(share_embeddings=False)
    assert own.generator.cls.predictions.decoder_weight is own.generator.bert.embeddings.word_embeddings.weight
    assert own.generator.bert.embeddings is not own.model.embeddings
    with pytest.raises(ConfigError, match="task.dropout"):
        electra_module(dropout=1.0)


def test_samples_follow_the_generator_replace_masked_tokens_only_and_the_original_drawn_is_no_replacement():
    input_ids = torch.tensor([[2, 10, 11, 12, 3], [2, 20, 21, 22, 3]])
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[0, 1], labels[0, 3], labels[1, 2] = 10, 12, 21
    logits = torch.full((3, VOCAB), -1e4)
    logits[0, 40] = logits[1, 12] = logits[2, 41] = 0.0  # row-major order of the labelled positions
    corrupted, replaced = replace_masked(input_ids, labels, logits, torch.Generator().manual_seed(0))
    assert corrupted.tolist() == [[2, 40, 11, 12, 3], [2, 20, 41, 22, 3]]
    assert replaced.tolist() == [[False, True, False, False, False], [False, False, True, False, False]]

    probabilities = torch.tensor([0.1, 0.6, 0.3])
    rows = torch.full((1, 20_000), 7)  # every position labelled, and 7 is none of the three: all replaced
    corrupted, replaced = replace_masked(rows, rows, probabilities.log().expand(20_000, 3),
                                         torch.Generator().manual_seed(0))
    assert replaced.all()
    assert torch.allclose(torch.bincount(corrupted.flatten(), minlength=3)[:3] / 20_000, probabilities, atol=0.015)


def test_training_learns_to_detect_the_replaced_tokens(tmp_path):
    torch.manual_seed(0)
    module = electra_module(config=NO_DROPOUT)
    batch = pretraining_batch()
    run = trainer(tmp_path, max_steps=150, log_every_n_steps=10)
    before = run.validate(module, loader([batch]), verbose=False)[0]
    run.fit(module, loader([batch] * 150))
    assert {"train/mlm_loss", "train/rtd_loss", "train/replaced"} <= set(run.logged_metrics)
    after = run.validate(module, loader([batch]), verbose=False)[0]
    assert after["val/rtd_loss"] < before["val/rtd_loss"] / 2
    assert after["val/mlm_loss"] < before["val/mlm_loss"] - 2.0
    assert after["val/loss"] == pytest.approx(after["val/mlm_loss"] + 50 * after["val/rtd_loss"], rel=1e-4)
    assert after["val/rtd_accuracy"] > 0.9 and 0 < after["val/replaced"] < 0.3


def test_validation_sets_given_as_a_dict_are_logged_each_under_its_own_name(tmp_path):
    run = trainer(tmp_path, max_steps=2, val_check_interval=2)
    sets = {"val": loader([pretraining_batch()]), "val_text": loader([pretraining_batch()])}
    run.fit(electra_module(), loader([pretraining_batch()] * 2), sets)
    names = ("loss", "mlm_loss", "rtd_loss", "rtd_accuracy", "replaced", "perplexity")
    assert {f"{prefix}/{name}" for prefix in sets for name in names} <= set(run.callback_metrics)
    assert run.callback_metrics["val/mlm_loss"] != run.callback_metrics["val_text/mlm_loss"]  # masked apart


def test_a_resumed_run_masks_samples_and_trains_exactly_like_an_uninterrupted_run(tmp_path):
    data = loader([pretraining_batch()] * 8)
    common = dict(accumulate_grad_batches=2, logger=False)
    straight, resumed = fit_straight_and_resumed(lambda: electra_module(config=NO_DROPOUT), data, tmp_path, **common)

    expected = all_weights(straight)
    assert any(key.startswith("generator.bert.encoder") for key in expected)
    assert all(torch.equal(expected[key], value) for key, value in all_weights(resumed).items())
    torch.manual_seed(0)
    other_seed = electra_module(config=NO_DROPOUT, seed=8)
    trainer(tmp_path, max_steps=4, **common).fit(other_seed, data)
    assert not all(torch.equal(expected[key], value) for key, value in all_weights(other_seed).items())


def test_train_exports_the_discriminator_as_a_bertmodel_that_transformers_and_fine_tune_read(
        tiny_data_dir, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    run_dir = tmp_path / "electra"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", run_dir, "task=electra",
                                         "trainer.max_steps=4", "trainer.val_check_interval=4"), capsys)
    assert outcome.code == 0, outcome.err
    exported = run_dir / "hf_model"
    assert json.loads((exported / "config.json").read_text())["architectures"] == ["BertModel"]
    weights = load_file(exported / "model.safetensors")
    assert not any(key.startswith(("generator", "discriminator_head", "cls.")) for key in weights)
    model, loading = transformers.BertModel.from_pretrained(exported, output_loading_info=True)
    assert not loading["unexpected_keys"] and set(loading["missing_keys"]) <= {"pooler.dense.weight",
                                                                               "pooler.dense.bias"}
    metrics = json.loads((run_dir / "metrics.json").read_text())["final"]
    assert {"val/rtd_accuracy", "val/perplexity", "train/rtd_loss"} <= set(metrics)

    tuned = tmp_path / "tuned"
    outcome = run_in_process(fine_tuning(tiny_data_dir, exported, tuned, f"model.init_from={exported}",
                                         "trainer.max_steps=2"), capsys)
    assert outcome.code == 0, outcome.err
    report = outcome.out[outcome.out.index("Loaded "):].split("\n  ignored")[0]
    new = report.split("newly initialised")[1]
    assert "classifier" in new and "pooler" in new and "embeddings" not in new and "encoder" not in new

    checkpoint = run_dir / "lightning_checkpoints" / "last.ckpt"
    outcome = run_in_process(pretraining(tiny_data_dir, tmp_path / "cache", tmp_path / "mlm", f"resume='{checkpoint}'"),
                             capsys)
    assert outcome.code == 1 and len(outcome.error_lines) == 1
    assert "was saved by ReplacedTokenDetectionModule (train), not by this run's PretrainingModule" \
        in outcome.error_lines[0]
