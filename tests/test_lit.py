"""Lightning modules, optimisation setup and callbacks, on a tiny BERT and in-memory batches."""

from __future__ import annotations

import functools
import json
import math

import lightning as L
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import EMAWeightAveraging, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader

from bertlab.config import BertConfig
from bertlab.lit.callbacks import ExportPretrained, FiniteLossGuard, MetricsArtifacts, ValidateFinalStep
from bertlab.lit.masking import mask_tokens, masking_generator
from bertlab.errors import BertlabError, ConfigError, DataError
from bertlab.lit import ClassificationModule, PretrainingModule
from bertlab.lit.optim import build_optimizer, parameter_groups, warmup_schedule
from bertlab.metrics import summarise_metrics
from bertlab.model import BertForMaskedLM, BertForSequenceClassification
from bertlab.tokenizer import load_tokenizer, train_tokenizer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hints about workers, logging

VOCAB, MASK_ID = 100, 4


def tiny_config(**overrides) -> BertConfig:
    values = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=32)
    return BertConfig(**{**values, **overrides})


def adamw(lr: float = 3e-3, weight_decay: float = 0.01):
    return functools.partial(torch.optim.AdamW, lr=lr, weight_decay=weight_decay)


def pretraining_batch(nsp: bool = False) -> dict[str, torch.Tensor]:
    """Row r repeats token 10 + r: a masked token can be recalled from its unmasked neighbours."""
    ids = (10 + torch.arange(8))[:, None].repeat(1, 16)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
             "special_tokens_mask": special}
    if nsp:
        batch["next_sentence_label"] = torch.arange(8) % 2
    return batch


def classification_batch(num_labels: int = 2) -> dict[str, torch.Tensor]:
    """Label = whether token 5 occurs: learnable from the input alone."""
    ids = torch.randint(6, VOCAB, (16, 12), generator=torch.Generator().manual_seed(1))
    ids[::2, 3] = 5
    has_five = (ids == 5).any(dim=1)
    labels = has_five.float() * 2 - 1 if num_labels == 1 else has_five.long()
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
            "labels": labels, "index": torch.arange(16)}


def loader(batches: list[dict]) -> DataLoader:
    return DataLoader(batches, batch_size=None)


@pytest.fixture(autouse=True)
def one_thread_and_seeded():
    # Models this small gain nothing from a second thread, and lose a lot when the cores are busy.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)


def trainer(tmp_path, max_steps: int, **kwargs) -> L.Trainer:
    options = dict(max_steps=max_steps, accelerator="cpu", devices=1, logger=CSVLogger(tmp_path / "logs"),
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   num_sanity_val_steps=0)
    return L.Trainer(**{**options, **kwargs})


# --- optimisation ----------------------------------------------------------------------------------

def test_parameter_groups_exclude_biases_and_layernorm_from_weight_decay():
    model = BertForSequenceClassification(tiny_config())
    groups = parameter_groups(model, weight_decay=0.01, lr=1e-3)
    by_name = {group["name"]: group for group in groups}
    assert set(by_name) == {"decay", "no_decay"}
    names = {id(param): name for name, param in model.named_parameters()}
    undecayed = {names[id(param)] for param in by_name["no_decay"]["params"]}
    assert by_name["no_decay"]["weight_decay"] == 0.0 and by_name["decay"]["weight_decay"] == 0.01
    assert all(name.endswith(".bias") or "LayerNorm" in name for name in undecayed)
    assert "bert.encoder.layer.1.output.LayerNorm.weight" in undecayed
    assert "classifier.bias" in undecayed and "classifier.weight" not in undecayed
    grouped = [id(param) for group in groups for param in group["params"]]
    assert sorted(grouped) == sorted(id(param) for param in model.parameters())


def test_layerwise_lr_decay_scales_each_layer_from_the_head_down():
    model = BertForSequenceClassification(tiny_config())
    groups = parameter_groups(model, weight_decay=0.01, lr=1.0, layerwise_lr_decay=0.5)
    lr_of = {id(param): group["lr"] for group in groups for param in group["params"]}
    expected = {"bert.embeddings.word_embeddings.weight": 0.125, "bert.embeddings.LayerNorm.bias": 0.125,
                "bert.encoder.layer.0.attention.self.query.weight": 0.25,
                "bert.encoder.layer.1.output.dense.bias": 0.5,
                "bert.pooler.dense.weight": 1.0, "classifier.weight": 1.0}
    params = dict(model.named_parameters())
    assert {name: lr_of[id(params[name])] for name in expected} == expected
    assert {group["name"] for group in groups} >= {"embeddings", "embeddings/no_decay", "layer_0", "head"}
    with pytest.raises(ConfigError, match="layerwise_lr_decay"):
        parameter_groups(model, 0.01, 1.0, layerwise_lr_decay=1.5)


def test_build_optimizer_reads_lr_and_weight_decay_from_the_partial():
    model = BertForMaskedLM(tiny_config())
    optimizer = build_optimizer(adamw(lr=2e-3, weight_decay=0.1), model)
    assert {(group["lr"], group["weight_decay"]) for group in optimizer.param_groups} == {(2e-3, 0.1), (2e-3, 0.0)}
    assert optimizer.defaults["fused"] is True
    assert build_optimizer(adamw(), model, allow_fused=False).defaults["foreach"] is True
    explicit = functools.partial(torch.optim.AdamW, lr=1e-3, foreach=False)
    assert not build_optimizer(explicit, model).defaults["fused"]
    with pytest.raises(ConfigError, match="optimizer.lr"):
        build_optimizer(functools.partial(torch.optim.AdamW, weight_decay=0.1), model)


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_gradients_are_clipped_before_the_fused_adamw_step(tmp_path, precision):
    # Adam's update is ~lr whatever the gradient's scale, unless clipping shrinks the gradient far
    # below eps: then the weights barely move.
    module = ClassificationModule(config=tiny_config(), optimizer=adamw(weight_decay=0.0))
    before = _weights(module)
    trainer(tmp_path, max_steps=2, precision=precision, gradient_clip_val=1e-12, limit_val_batches=0
            ).fit(module, loader([classification_batch()] * 2))
    assert module.trainer.optimizers[0].defaults["fused"] is True
    moved = max((after - before[name]).abs().max().item() for name, after in _weights(module).items())
    assert 0 < moved < 1e-5


def _lr_curve(schedule: str, total: int = 20, **kwargs) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = warmup_schedule(optimizer, total_steps=total, schedule=schedule, **kwargs)
    curve = []
    for _ in range(total + 1):
        curve.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return curve


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_schedule_warms_up_then_decays_to_zero(schedule):
    curve = _lr_curve(schedule, warmup_steps=5)
    assert curve[:6] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    decay = curve[5:]
    assert all(a > b for a, b in zip(decay, decay[1:]))
    assert curve[20] == pytest.approx(0.0, abs=1e-12)
    assert curve[5 + 15 // 2] == pytest.approx(0.5, abs=0.06)  # half the peak halfway through the decay
    if schedule == "cosine":
        assert curve[6] > 1.0 - 1 / 15  # cosine starts flatter than linear


def test_schedule_ratio_constant_and_invalid_settings():
    assert _lr_curve("constant", warmup_ratio=0.25)[:7] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0])
    assert _lr_curve("constant")[-1] == 1.0
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ConfigError, match="unknown schedule 'step'"):
        warmup_schedule(optimizer, total_steps=10, schedule="step")
    with pytest.raises(ConfigError, match="max_steps"):
        warmup_schedule(optimizer, total_steps=float("inf"))


# --- pretraining -----------------------------------------------------------------------------------

def pretraining_module(**kwargs) -> PretrainingModule:
    options = dict(config=tiny_config(), mask_token_id=MASK_ID, optimizer=adamw(lr=1e-2),
                   scheduler=functools.partial(warmup_schedule, warmup_steps=3), mlm_probability=0.3, seed=7)
    return PretrainingModule(**{**options, **kwargs})


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


def test_pretraining_dropout_holds_for_the_run_and_the_checkpoint_keeps_the_models(tmp_path):
    config = tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    batch = pretraining_batch()

    def two_training_forwards(model):
        return [model.train()(batch["input_ids"], batch["attention_mask"]).logits for _ in range(2)]

    module = pretraining_module(config=config, dropout=0.0)
    assert torch.equal(*two_training_forwards(module.model))
    assert module.model.config.hidden_dropout_prob == 0.3
    module.model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["attention_probs_dropout_prob"] == 0.3
    assert not torch.equal(*two_training_forwards(BertForMaskedLM.from_pretrained(tmp_path)))
    with pytest.raises(ConfigError, match="task.dropout"):
        pretraining_module(dropout=1.0)


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


def test_summary_picks_the_best_value_in_each_metrics_direction():
    frame = pd.DataFrame({"step": [9, 19, 29], "epoch": [0, 0, 0], "val/loss": [2.0, 1.0, 1.5],
                          "val/accuracy": [0.5, 0.4, 0.7], "train/loss": [3.0, None, 2.5]})
    summary = summarise_metrics(frame)
    assert summary["best"] == {"val/loss": {"value": 1.0, "step": 19}, "val/accuracy": {"value": 0.7, "step": 29}}
    assert summary["final"] == {"val/loss": 1.5, "val/accuracy": 0.7, "train/loss": 2.5}


def test_masking_generator_depends_only_on_seed_and_position():
    def draws(*key):
        return torch.rand(5, generator=masking_generator(*key))

    assert torch.equal(draws(7, 0, 3, 1), draws(7, 0, 3, 1))
    assert not torch.equal(draws(7, 0, 3, 1), draws(7, 0, 4, 1))
    assert not torch.equal(draws(7, 0, 3, 1), draws(7, 0, 3, 0))
    assert not torch.equal(draws(7, 0, 3, 1), draws(8, 0, 3, 1))


def _weights(module):
    return {key: value.clone() for key, value in module.model.state_dict().items()}


def test_resumed_pretraining_masks_and_trains_exactly_like_an_uninterrupted_run(tmp_path, monkeypatch):
    masks: list[torch.Tensor] = []

    def recording_mask_tokens(*args, **kwargs):
        masked, labels = mask_tokens(*args, **kwargs)
        masks.append(labels != -100)
        return masked, labels

    monkeypatch.setattr("bertlab.lit.pretraining.mask_tokens", recording_mask_tokens)
    no_dropout = tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    data = loader([pretraining_batch()] * 8)
    common = dict(accumulate_grad_batches=2, logger=False)

    straight = pretraining_module(config=no_dropout)
    trainer(tmp_path, max_steps=4, **common).fit(straight, data)
    straight_masks, masks[:] = masks[:], []

    torch.manual_seed(0)
    first_half = pretraining_module(config=no_dropout)
    interrupted = trainer(tmp_path, max_steps=2, **common)
    interrupted.fit(first_half, data)
    interrupted.save_checkpoint(tmp_path / "half.ckpt")
    resumed = pretraining_module(config=no_dropout)
    trainer(tmp_path, max_steps=4, **common).fit(resumed, data, ckpt_path=tmp_path / "half.ckpt")

    # 4 optimizer steps x 2 micro-batches, each masked differently; the resumed run repeats them all.
    assert len(straight_masks) == 8
    assert len({tuple(mask.flatten().tolist()) for mask in straight_masks}) == 8
    assert all(torch.equal(a, b) for a, b in zip(masks, straight_masks, strict=True))
    expected = _weights(straight)
    assert all(torch.equal(expected[key], value) for key, value in _weights(resumed).items())

    torch.manual_seed(0)
    other_seed = pretraining_module(config=no_dropout, seed=8)
    trainer(tmp_path, max_steps=4, **common).fit(other_seed, data)
    assert not all(torch.equal(expected[key], value) for key, value in _weights(other_seed).items())


def test_pretraining_checkpoint_reloads_with_its_hyperparameters(tmp_path):
    module = pretraining_module(special_token_ids=[0, 1, 2, 3])
    run = trainer(tmp_path, max_steps=1, logger=False)
    run.fit(module, loader([pretraining_batch()]))
    run.save_checkpoint(tmp_path / "model.ckpt")
    reloaded = PretrainingModule.load_from_checkpoint(tmp_path / "model.ckpt", weights_only=True)
    assert reloaded.hparams.seed == 7 and reloaded.hparams.special_token_ids == [0, 1, 2, 3]
    assert reloaded.model.config.to_dict() == module.model.config.to_dict()
    assert all(torch.equal(value, _weights(module)[key]) for key, value in _weights(reloaded).items())


# --- classification --------------------------------------------------------------------------------

@pytest.mark.parametrize("num_labels", [2, 1])
def test_classification_trains_evaluates_and_predicts(tmp_path, num_labels):
    batch = classification_batch(num_labels)
    module = ClassificationModule(tiny_config(num_labels=num_labels), optimizer=adamw(lr=1e-2),
                                  layerwise_lr_decay=0.8)
    run = trainer(tmp_path, max_steps=10)
    before = run.validate(module, loader([batch]), verbose=False)[0]
    run.fit(module, loader([batch] * 10))
    after = run.validate(module, loader([batch]), verbose=False)[0]

    assert after["val/loss"] < before["val/loss"] / 2
    if num_labels == 2:
        assert set(after) == {"val/loss", "val/accuracy", "val/f1", "val/mcc"}
        assert after["val/accuracy"] == 1.0 and after["val/f1"] == 1.0 and after["val/mcc"] == pytest.approx(1.0)
    else:
        assert set(after) == {"val/loss", "val/pearson", "val/spearman", "val/mse"}
        assert after["val/pearson"] > 0.9 and after["val/mse"] == pytest.approx(after["val/loss"], rel=1e-4)
    head_lr, embedding_lr = (next(g["lr"] for g in run.optimizers[0].param_groups if g["name"] == name)
                             for name in ("head", "embeddings"))
    assert embedding_lr == pytest.approx(head_lr * 0.8 ** 3)

    shuffled = {key: value.flip(0) for key, value in batch.items()}
    (prediction,) = run.predict(module, loader([shuffled]))
    assert torch.equal(prediction["index"], torch.arange(16).flip(0))
    if num_labels == 2:
        assert prediction["probabilities"].shape == (16, 2)
        assert torch.allclose(prediction["probabilities"].sum(-1), torch.ones(16))
        assert torch.equal(prediction["probabilities"].argmax(-1), shuffled["labels"])
    else:
        assert prediction["predictions"].shape == (16,)


def test_classification_uses_a_given_model_and_stores_its_config():
    model = BertForSequenceClassification(tiny_config(num_labels=3, id2label={0: "a", 1: "b", 2: "c"}))
    module = ClassificationModule(model=model, optimizer=adamw())
    assert module.model is model
    assert BertConfig.from_dict(module.hparams.config) == model.config
    with pytest.raises(ConfigError, match="neither"):
        ClassificationModule(optimizer=adamw())


def test_classification_freezes_the_named_parameters(tmp_path):
    module = ClassificationModule(tiny_config(), optimizer=adamw(lr=1e-2),
                                  freeze=["bert.embeddings.word_embeddings.*", "bert.encoder.layer.0.*"])
    before = {name: param.detach().clone() for name, param in module.model.named_parameters()}
    trainer(tmp_path, max_steps=3, logger=False).fit(module, loader([classification_batch()] * 3))

    changed = {name for name, param in module.model.named_parameters() if not torch.equal(param, before[name])}
    frozen = {name for name in before if name == "bert.embeddings.word_embeddings.weight"
              or name.startswith("bert.encoder.layer.0.")}
    assert len(frozen) == 17 and not changed & frozen
    assert {"bert.embeddings.position_embeddings.weight", "bert.encoder.layer.1.output.dense.weight",
            "classifier.weight"} <= changed
    with pytest.raises(ConfigError, match=r"task.freeze: 'bert.embedding.\*' matches no parameter"):
        ClassificationModule(tiny_config(), freeze=["bert.embedding.*"])


# --- callbacks -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer():
    texts = ["the cat sat on the mat", "a dog ate the bone", "the bird sang a song"] * 5
    return train_tokenizer(texts, vocab_size=60, min_frequency=1)


def test_export_writes_a_loadable_directory_atomically(tmp_path, tokenizer):
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    (export_dir / "stale.txt").write_text("from an earlier export")
    module = pretraining_module()
    run = trainer(tmp_path, max_steps=2, logger=False,
                  callbacks=[ExportPretrained(str(export_dir), tokenizer=tokenizer)])
    run.fit(module, loader([pretraining_batch()] * 2))

    loaded = BertForMaskedLM.from_pretrained(export_dir)
    assert loaded.load_report.complete
    trained = _weights(module)
    assert all(torch.equal(value, trained[key]) for key, value in loaded.state_dict().items())
    assert load_tokenizer(export_dir).get_vocab() == tokenizer.get_vocab()
    assert not (export_dir / "stale.txt").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["export"]  # no temporary siblings left


def test_export_of_the_best_checkpoint_reloads_its_weights(tmp_path, tokenizer):
    batch = classification_batch()
    module = ClassificationModule(tiny_config(), optimizer=adamw(lr=5e-3))
    # "Best" = highest validation loss, i.e. an early checkpoint that differs from the final weights.
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val/loss", mode="max")
    export = ExportPretrained(str(tmp_path / "best"), weights="best", tokenizer=tokenizer)
    run = trainer(tmp_path, max_steps=6, enable_checkpointing=True, val_check_interval=2,
                  callbacks=[checkpoint, export])
    run.fit(module, loader([batch] * 6), loader([batch]))

    best = torch.load(checkpoint.best_model_path, weights_only=True)["state_dict"]
    exported = BertForSequenceClassification.from_pretrained(tmp_path / "best").state_dict()
    assert all(torch.equal(value, best[f"model.{key}"]) for key, value in exported.items())
    final = _weights(module)
    assert not all(torch.equal(value, final[key]) for key, value in exported.items())


class RecordWeights(L.Callback):
    def __init__(self):
        self.steps = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.steps.append(_weights(pl_module))


def test_weight_averaging_validates_checkpoints_and_exports_the_average(tmp_path, tokenizer):
    batch = classification_batch()
    module = ClassificationModule(tiny_config(), optimizer=adamw(lr=5e-3))
    record = RecordWeights()
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val/loss", mode="min")
    export = ExportPretrained(str(tmp_path / "best"), weights="best", tokenizer=tokenizer)
    run = trainer(tmp_path, max_steps=6, enable_checkpointing=True, val_check_interval=3,
                  callbacks=[EMAWeightAveraging(decay=0.5), record, checkpoint, export])
    run.fit(module, loader([batch] * 6), loader([batch]))

    average = dict(record.steps[0])
    for weights in record.steps[1:]:
        average = {key: 0.5 * value + 0.5 * weights[key] for key, value in average.items()}
    exported = BertForSequenceClassification.from_pretrained(tmp_path / "best").state_dict()
    assert checkpoint.best_model_path.endswith("step=6.ckpt")  # the loss falls: the last validation is best
    for key, value in exported.items():
        torch.testing.assert_close(value, average[key], msg=key)
    assert not all(torch.equal(value, record.steps[-1][key]) for key, value in exported.items())


@pytest.mark.parametrize(("limits", "intervals"), [({"max_steps": 7}, [2, 5]),
                                                   ({"max_steps": -1, "max_epochs": 2}, [2, 5, 8])],
                         ids=["max_steps", "max_epochs"])  # 2 epochs of 5 batches: 10 steps
@pytest.mark.parametrize("validate_final_step", [False, True])
def test_the_final_step_is_validated_between_two_intervals(tmp_path, limits, intervals, validate_final_step):
    callbacks = [ValidateFinalStep()] if validate_final_step else []
    run = trainer(tmp_path, val_check_interval=3, check_val_every_n_epoch=None, callbacks=callbacks, **limits)
    run.fit(ClassificationModule(tiny_config(), optimizer=adamw()), loader([classification_batch()] * 5),
            loader([classification_batch()]))

    frame = pd.read_csv(run.logger.log_dir + "/metrics.csv")
    validated = frame.loc[frame["val/loss"].notna(), "step"].tolist()
    final_step = run.global_step - 1
    assert final_step == (6 if "max_epochs" not in limits else 9)
    assert validated == intervals + [final_step] * validate_final_step


class NaNAtStep3(ClassificationModule):
    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        return loss * float("nan") if self.global_step == 3 else loss


def test_finite_loss_guard_stops_at_the_bad_step_and_keeps_the_good_checkpoints(tmp_path):
    module = NaNAtStep3(tiny_config(), optimizer=adamw())
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=1, save_top_k=-1)
    run = trainer(tmp_path, max_steps=10, enable_checkpointing=True, logger=False,
                  callbacks=[checkpoints, FiniteLossGuard(check_every_n_steps=4)])
    with pytest.raises(BertlabError, match=r"NaN or inf at training step 3 .*kept in"):
        run.fit(module, loader([classification_batch()] * 10))
    saved = sorted(path.name for path in (tmp_path / "ckpt").iterdir())
    assert saved == ["epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt", "epoch=0-step=3.ckpt"]


def test_metrics_artifacts_require_a_csv_logger(tmp_path):
    run = trainer(tmp_path, max_steps=1, logger=False, callbacks=[MetricsArtifacts()])
    with pytest.raises(ConfigError, match="CSVLogger"):
        run.fit(pretraining_module(), loader([pretraining_batch()]))
