"""General distillation in pretraining (bertlab.lit.general_distillation, `train +recipe=mlm_tiny_distill`):
gradients reach the student alone, a toy student's relations move towards a toy teacher's, a student equal
to the teacher has nothing to learn, the export is a plain BertForMaskedLM that transformers loads, and bad
settings are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from bertlab.checkpoint.dispatch import load_into
from bertlab.errors import ConfigError
from bertlab.lit.general_distillation import GeneralDistillationModule
from bertlab.lit.masking import masking_generator
from tests.lit.helpers import adamw, loader, save_tiny_bert, small_config, trainer

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the bird sang a song", "we read a book"] * 4
TEACHER_WIDTH = 48  # the student's is 32


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> str:
    return str(save_tiny_bert(tmp_path_factory.mktemp("general_distillation") / "teacher", TEXTS,
                              hidden_size=TEACHER_WIDTH, num_attention_heads=4, num_hidden_layers=3))


def vocab(teacher: str) -> int:
    return transformers.BertConfig.from_pretrained(teacher).vocab_size


def module(teacher: str, **kwargs) -> GeneralDistillationModule:
    options = dict(config=small_config(vocab_size=vocab(teacher)), mask_token_id=4, teacher=teacher, teacher_layer=2,
                   relation_heads=4, optimizer=adamw(lr=1e-2), mlm_probability=0.3, seed=7, unigram_output_bias=False)
    return GeneralDistillationModule(**{**options, **kwargs})


def batch(teacher: str, padded: bool = True) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, vocab(teacher), (4, 10), generator=torch.Generator().manual_seed(3))
    ids[:, 0], ids[:, -1] = 2, 3
    mask = torch.ones_like(ids)
    if padded:
        ids[1, 6:], mask[1, 6:] = 0, 0
    special = (ids == 2) | (ids == 3) | (mask == 0)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
            "special_tokens_mask": special}


def distillation_loss(distilling: GeneralDistillationModule, rows: dict[str, torch.Tensor]) -> torch.Tensor:
    states, _ = distilling._student_attention_input(rows, masking_generator(0, 0))
    return distilling.distillation_losses(rows, states)["relation_loss"]


def test_a_step_changes_the_student_alone_and_the_teacher_stays_out_of_the_state_dict(teacher, tmp_path):
    distilling = module(teacher, hidden_weight=1.0)
    teacher_before = {key: value.clone() for key, value in distilling.teacher.model.state_dict().items()}
    student_before = {key: value.clone() for key, value in distilling.model.state_dict().items()}
    trainer(tmp_path, max_steps=2).fit(distilling, loader([batch(teacher)] * 2))
    assert all(torch.equal(value, teacher_before[key]) for key, value in distilling.teacher.model.state_dict().items())
    assert all(parameter.grad is None and not parameter.requires_grad
               for parameter in distilling.teacher.model.parameters())
    assert not distilling.teacher.model.training
    changed = [key for key, value in distilling.model.state_dict().items()
               if not torch.equal(value, student_before[key])]
    assert any(".encoder.layer.1.attention.self.query." in key for key in changed)
    assert {key.split(".")[0] for key in distilling.state_dict()} == {"model", "projection"}


def test_a_few_steps_bring_the_students_relations_towards_the_teachers(teacher):
    distilling = module(teacher, mlm_weight=0.0)
    rows = batch(teacher)
    optimizer = torch.optim.Adam(distilling.model.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = distillation_loss(distilling, rows)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[-1] < 0.5 * losses[0]


def test_a_student_equal_to_the_teacher_has_no_relation_loss(teacher):
    config = transformers.BertConfig.from_pretrained(teacher).to_dict()
    shape = {key: config[key] for key in ("vocab_size", "hidden_size", "num_attention_heads", "intermediate_size",
                                          "max_position_embeddings")}
    distilling = module(teacher, config=small_config(**shape, num_hidden_layers=2), mlm_weight=0.0).eval()
    load_into(distilling.model, Path(teacher))  # the student's two layers are the teacher's first two
    rows = batch(teacher)
    equal, other = distillation_loss(distilling, rows), distillation_loss(module(teacher, mlm_weight=0.0).eval(), rows)
    assert equal.item() == pytest.approx(0.0, abs=1e-7) and other.item() > 1e-4


def test_the_export_is_a_plain_masked_lm_that_transformers_loads(teacher, tmp_path):
    distilling = module(teacher, hidden_weight=1.0)
    distilling.model.save_pretrained(tmp_path / "hf_model")
    model, info = transformers.BertForMaskedLM.from_pretrained(tmp_path / "hf_model", output_loading_info=True)
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [] and info["mismatched_keys"] == []


@pytest.mark.parametrize("options, message", [
    ({"config": small_config()}, r"its vocabulary has \d+ tokens, the student's 100; .* set tokenizer.path"),
    ({"teacher_layer": 4}, "task.teacher_layer=4: must be from 1 to the teacher's 3 layers"),
    ({"relation_heads": 3}, r"task.relation_heads=3: must divide the hidden sizes .* \(48, 32\)"),
    ({"relations": ["query-value"]}, r"GeneralDistillationModule\(relations=\['query-value'\]\): must be some of "
                                     "query-query, key-key, value-value, query-key"),
    ({"relation_weight": 0.0}, "nothing is distilled; use task=mlm"),
    ({"nsp": True}, "task.nsp=true: general distillation trains a BertForMaskedLM"),
    ({"softmax_samples": 64}, "^task.softmax_samples=64: GeneralDistillationModule trains with the full softmax; "
                              "set task.softmax_samples=null$"),
])
def test_bad_settings_are_one_line_errors(teacher, options, message):
    with pytest.raises(ConfigError, match=message):
        module(teacher, **options)
