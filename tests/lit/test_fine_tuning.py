"""What every fine-tuning task shares (bertlab.lit.fine_tuning): parameters frozen by glob pattern, the task's model
class built from a config dict, options kept beside the shared hyperparameters, the training step's loss on the
batch's targets, an optimizer of the unfrozen parameters with a layerwise decay, and the FLOPs of a per-piece head
(the tasks built on it: tests/lit/test_classification.py, test_token_classification.py, test_question_answering.py)."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.lit.fine_tuning import FineTuningModule, freeze_parameters, per_piece_forward_flops
from bertlab.model import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from tests.lit.helpers import adamw, classification_batch, small_config

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's hint: `self.log` with no Trainer


class Tagging(FineTuningModule):
    model_class = BertForTokenClassification


class Spans(FineTuningModule):
    model_class = BertForQuestionAnswering
    targets = ("start_positions", "end_positions")


# --- frozen parameters -------------------------------------------------------------------------


def test_freeze_stops_training_exactly_the_parameters_a_pattern_matches():
    model = BertForSequenceClassification(small_config())
    freeze_parameters(model, ["*.LayerNorm.*", "bert.encoder.layer.1.attention.self.*"])
    frozen = {name for name, parameter in model.named_parameters() if not parameter.requires_grad}
    assert frozen == {name for name, _ in model.named_parameters()
                      if ".LayerNorm." in name or name.startswith("bert.encoder.layer.1.attention.self.")}
    # The embeddings' norm and two per layer, each a weight and a bias; query, key and value of one layer.
    assert len(frozen) == 2 * (1 + 2 * 2) + 6


def test_a_pattern_matching_no_parameter_is_refused_before_anything_is_frozen():
    model = BertForSequenceClassification(small_config())
    with pytest.raises(ConfigError, match=r"^task\.freeze: 'bert\.embedding\.\*' matches no parameter of the model; "
                                          r"names look like 'bert\.embeddings\.word_embeddings\.weight' or "
                                          r"'classifier\.bias'$"):
        freeze_parameters(model, ["bert.encoder.*", "bert.embedding.*"])
    assert all(parameter.requires_grad for parameter in model.parameters())


# --- the module --------------------------------------------------------------------------------


def test_a_config_dict_builds_the_tasks_model_class_and_is_saved_with_the_shared_options():
    config = small_config(num_labels=3)
    module = Tagging(config.to_dict(), layerwise_lr_decay=0.5, freeze=("bert.embeddings.*",))
    assert type(module.model) is BertForTokenClassification and module.model.config.to_dict() == config.to_dict()
    assert dict(module.hparams) == {"config": config.to_dict(), "layerwise_lr_decay": 0.5, "compile": False,
                                    "freeze": ["bert.embeddings.*"]}
    assert not any(parameter.requires_grad for parameter in module.model.bert.embeddings.parameters())
    module.keep_options(n_best=5, max_answer_length=30)
    assert dict(module.hparams) == {"config": config.to_dict(), "layerwise_lr_decay": 0.5, "compile": False,
                                    "freeze": ["bert.embeddings.*"], "n_best": 5, "max_answer_length": 30}
    assert BertConfig.from_dict(module.hparams.config) == module.model.config


def test_a_layerwise_decay_outside_0_to_1_is_refused():
    with pytest.raises(ConfigError, match=r"^FineTuningModule\(layerwise_lr_decay=1\.5\): must be in \(0, 1\]$"):
        FineTuningModule(small_config(), layerwise_lr_decay=1.5)
    FineTuningModule(small_config(), layerwise_lr_decay=1.0)  # no decay: every layer at the head's rate


def test_the_training_step_is_the_models_loss_on_the_batchs_targets_alone():
    module = Spans(small_config(num_labels=2)).eval()  # no dropout: the two forward passes agree
    batch = classification_batch()  # its `labels` are no target of a span head
    batch["start_positions"], batch["end_positions"] = torch.arange(16) % 12, (torch.arange(16) + 3) % 12
    loss = module.training_step(batch, 0)
    expected = module.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                            start_positions=batch["start_positions"], end_positions=batch["end_positions"]).loss
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert module._batch_shape == (16, 12)  # counted for the throughput monitor


def test_the_optimizer_trains_the_unfrozen_parameters_at_a_rate_decaying_layer_by_layer():
    module = FineTuningModule(small_config(), optimizer=adamw(lr=1e-3), layerwise_lr_decay=0.5,
                              freeze=["bert.embeddings.*"])
    module.trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                               enable_progress_bar=False, enable_model_summary=False)
    configured = module.configure_optimizers()
    assert set(configured) == {"optimizer"}  # no scheduler configured
    groups = configured["optimizer"].param_groups
    trained = {id(parameter) for group in groups for parameter in group["params"]}
    assert trained == {id(parameter) for name, parameter in module.model.named_parameters()
                       if not name.startswith("bert.embeddings.")}
    # Two encoder layers below the head (the pooler and the classifier).
    assert {group["name"].removesuffix("/no_decay"): group["lr"] for group in groups} == pytest.approx(
        {"head": 1e-3, "layer_1": 0.5e-3, "layer_0": 0.25e-3})


# --- FLOPs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_class, options", [
    (BertForTokenClassification, dict(num_labels=5)),
    (BertForTokenClassification, dict(num_labels=5, classifier_pooling="cls")),  # ModernBERT's dense head first
    (BertForQuestionAnswering, dict(num_labels=2)),
    (BertForQuestionAnswering, dict(num_labels=2, classifier_pooling="mean", gated_ffn=True)),
])
def test_per_piece_flops_match_torch_flop_counter_on_a_forward_pass(model_class, options):
    # Eager attention: torch's counter leaves out the CPU's fused attention kernel.
    model = model_class(small_config(attn_implementation="eager", **options)).eval()
    input_ids = torch.randint(5, 100, (3, 10), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids, torch.ones_like(input_ids))
    assert per_piece_forward_flops(model, batch_size=3, length=10) == counter.get_total_flops()
