"""`GeneralDistillationModule`: masked-LM pretraining with general distillation from a pretrained teacher
(`train +recipe=mlm_tiny_distill`), as MiniLM and TinyBERT distil before any task:

    loss = mlm_weight · masked-LM loss
         + relation_weight · Σ over `relations` of KL(teacher relation ‖ student relation)
         + hidden_weight · MSE(W · student states, teacher states)

The relations (bertlab.lit.relations) are those of the student's last self-attention and of the teacher's
layer `teacher_layer` (MiniLMv2 takes an upper-middle layer); the hidden states are what those two
attentions read, W a learned projection to the teacher's width. The teacher (bertlab.teacher.layer_states)
runs only up to that attention, in eval mode and without gradients, under the step's autocast; it is no
submodule, so checkpoints, the optimizer and the export hold the student alone, and W is saved in the
Lightning checkpoints only: the run exports a plain BertForMaskedLM. Both read the teacher's tokens (the
data's tokenizer must be the teacher's); the student reads the masked text when it learns masked LM too,
the teacher always the text itself. Validation is PretrainingModule's, on the student.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import torch
from torch import nn

from bertlab.argument_checks import Count, NonNegative, SomeOf, checks_arguments
from bertlab.config import BertConfig
from bertlab.errors import ConfigError
from bertlab.lit.masking import masking_generator
from bertlab.lit.optim import configure_optimization
from bertlab.lit.pretraining import TRAIN_STREAM, PretrainingModule, checked_model_config
from bertlab.lit.relations import RELATIONS, check_relation_heads, masked_mse, relation_kl, relation_scores
from bertlab.teacher.layer_states import LayerTeacher, read_attention_input
from bertlab.tokenizer import load_tokenizer

MINILM_V2_RELATIONS = ("query-query", "key-key", "value-value")


def trains_masked_lm(arguments: Mapping[str, Any]) -> str | None:
    if arguments["pretraining"].get("nsp"):
        return "task.nsp=true: general distillation trains a BertForMaskedLM; set task.nsp=false"
    return None


def distils_something(arguments: Mapping[str, Any]) -> str | None:
    if not (arguments["relation_weight"] and arguments["relations"]) and not arguments["hidden_weight"]:
        return ("task.relation_weight and task.hidden_weight are 0 (or task.relations empty): nothing is distilled; "
                "use task=mlm for masked LM alone")
    return None


def full_softmax(arguments: Mapping[str, Any]) -> str | None:
    """The training step is this module's own: PretrainingModule's sampled softmax has no part in it."""
    if (samples := arguments["pretraining"].get("softmax_samples")) is not None:
        return (f"task.softmax_samples={samples}: GeneralDistillationModule trains with the full softmax; "
                f"set task.softmax_samples=null")
    return None


@checks_arguments(between=(trains_masked_lm, full_softmax, distils_something))
class GeneralDistillationModule(PretrainingModule):
    """`teacher`: a BertModel folder; `teacher_layer`: its layer (from 1) whose relations and input states the
    student's last layer learns; `relations`: names of bertlab.lit.relations.RELATIONS; `relation_heads`:
    the relation heads both widths are split into; the three weights as in the module's docstring. The
    other arguments are PretrainingModule's (`nsp` must stay false)."""

    def __init__(self, config: BertConfig | Mapping[str, Any], mask_token_id: int, teacher: str | None = None,
                 teacher_layer: Count = 5,
                 relations: Annotated[Sequence[str], SomeOf(*RELATIONS)] = MINILM_V2_RELATIONS,
                 relation_heads: Count = 8, relation_weight: NonNegative = 1.0, mlm_weight: NonNegative = 1.0,
                 hidden_weight: NonNegative = 0.0, **pretraining: Any):
        super().__init__(config, mask_token_id, **pretraining)
        student = checked_model_config(config, mask_token_id)
        self.teacher = LayerTeacher(teacher, teacher_layer)
        if self.teacher.config.vocab_size != student.vocab_size:
            raise ConfigError(f"task.teacher={teacher}: its vocabulary has {self.teacher.config.vocab_size} tokens, "
                              f"the student's {student.vocab_size}; the student reads the teacher's tokens: set "
                              f"tokenizer.path to the teacher's folder")
        check_relation_heads(relation_heads, self.teacher.config.hidden_size, student.hidden_size)
        self.save_hyperparameters({**self.hparams, "teacher": teacher, "teacher_layer": teacher_layer,
                                   "relations": list(relations), "relation_heads": relation_heads,
                                   "relation_weight": relation_weight, "mlm_weight": mlm_weight,
                                   "hidden_weight": hidden_weight})
        if hidden_weight:
            self.projection = nn.Linear(student.hidden_size, self.teacher.config.hidden_size)

    def setup(self, stage: str) -> None:
        """Before fitting: the data's tokenizer is the teacher's, so that both read the same token ids."""
        data = getattr(self.trainer, "datamodule", None)
        tokenizer = getattr(data, "tokenizer", None)
        if stage == "fit" and tokenizer is not None \
                and tokenizer.get_vocab() != load_tokenizer(self.hparams.teacher).get_vocab():
            raise ConfigError(f"the data's tokenizer is not the teacher's ({self.hparams.teacher}); the student reads "
                              f"the teacher's tokens: set tokenizer.path to the teacher's folder")

    def on_fit_start(self) -> None:
        self.teacher.to(self.device)

    def _student_attention_input(self, batch: dict[str, torch.Tensor], generator: torch.Generator):
        """What the student's last self-attention read, and its masked-LM loss (None when mlm_weight is 0:
        the student then reads the text itself and stops at that attention)."""
        attention = self.model.bert.encoder.layer[-1].attention.self
        if self.hparams.mlm_weight:
            states, (output, _) = read_attention_input(
                attention, lambda: self._masked_forward(batch, generator, return_logits=False))
            return states, output.loss
        self.count_batch(batch)
        states, _ = read_attention_input(attention, lambda: self.model.bert(
            batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")), finish=False)
        return states, None

    def distillation_losses(self, batch: dict[str, torch.Tensor],
                            student_states: torch.Tensor) -> dict[str, torch.Tensor]:
        """The relation and hidden-state losses of the student's last attention input against the teacher's."""
        keep = batch["attention_mask"].bool() if batch.get("attention_mask") is not None \
            else torch.ones_like(batch["input_ids"], dtype=torch.bool)
        teacher_states = self.teacher.attention_input(batch["input_ids"], batch.get("attention_mask"),
                                                      batch.get("token_type_ids"))
        losses = {}
        if self.hparams.relation_weight and self.hparams.relations:
            losses["relation_loss"] = sum(self._relation_loss(name, teacher_states, student_states, keep)
                                          for name in self.hparams.relations)
        if self.hparams.hidden_weight:
            losses["hidden_loss"] = masked_mse(self.projection(student_states), teacher_states, keep)
        return losses

    def _relation_loss(self, name: str, teacher_states: torch.Tensor, student_states: torch.Tensor,
                       keep: torch.Tensor) -> torch.Tensor:
        left, right = RELATIONS[name]
        heads = self.hparams.relation_heads
        student = self.model.bert.encoder.layer[-1].attention.self
        with torch.no_grad():
            teacher = self.teacher.attention
            target = relation_scores(getattr(teacher, left)(teacher_states), getattr(teacher, right)(teacher_states),
                                     heads, keep)
        learnt = relation_scores(getattr(student, left)(student_states), getattr(student, right)(student_states),
                                 heads, keep)
        return relation_kl(target, learnt, keep)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        micro_batch = batch_idx % self.trainer.accumulate_grad_batches
        generator = masking_generator(self.hparams.seed, TRAIN_STREAM, self.global_rank, self.global_step,
                                      micro_batch, device=self.device)
        student_states, mlm_loss = self._student_attention_input(batch, generator)
        losses = self.distillation_losses(batch, student_states)
        weights = {"relation_loss": self.hparams.relation_weight, "hidden_loss": self.hparams.hidden_weight}
        loss = sum(weights[name] * value for name, value in losses.items())
        if mlm_loss is not None:
            losses["mlm_loss"] = mlm_loss
            loss = loss + self.hparams.mlm_weight * mlm_loss
        batch_size = batch["input_ids"].shape[0]
        self.log("train/loss", loss.detach(), prog_bar=True, batch_size=batch_size)
        self.log_dict({f"train/{name}": value.detach() for name, value in losses.items()}, batch_size=batch_size)
        return loss

    def configure_optimizers(self) -> dict:
        if not self.hparams.hidden_weight:
            return super().configure_optimizers()
        trained = nn.ModuleDict({"model": self.model, "projection": self.projection})
        return configure_optimization(self, self.optimizer_factory, self.scheduler_factory, trained=trained)
