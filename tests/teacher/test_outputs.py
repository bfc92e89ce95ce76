"""A classifier teacher's outputs on a distillation's texts (bertlab.teacher.outputs): equal to a forward of each
text alone, computed once per text and loaded from the cache after, taken from earlier files for a changed set of
texts, read again for a retrained teacher; and teacher.json, the run's record of them."""

from __future__ import annotations

import json
import shutil

import torch

from bertlab.model import BertForSequenceClassification
from bertlab.teacher import outputs as teacher_module
from bertlab.teacher.outputs import TeacherOutputs, teacher_outputs, write_report
from bertlab.tokenizer import load_tokenizer
from tests.factories import perturbed

CPU = torch.device("cpu")
OPTIONS = dict(max_seq_length=32, batch_size=3, device=CPU, dtype=None)
TRAIN = (["the movie was good", "a dull plot", "great", "the actors were really awful and the story dull"],
         ["yes", "no", "a wonderful film", "bad"])
VALIDATION = (["quite a moving story", "boring"], ["good", "the plot"])


def test_the_teacher_reads_every_text_once_and_not_again_from_the_cache(classifier_dir, tmp_path, monkeypatch):
    seen = []  # rows of each teacher forward
    forward = BertForSequenceClassification.forward

    def counted_forward(model, input_ids, *args, **kwargs):
        seen.append(len(input_ids))
        return forward(model, input_ids, *args, **kwargs)

    monkeypatch.setattr(BertForSequenceClassification, "forward", counted_forward)
    texts = ([f"good movie number {i}" for i in range(30)], None), (["a dull plot", "great"], None)
    options = dict(layers=[1], max_seq_length=32, batch_size=8, device=torch.device("cpu"), dtype=None,
                   cache_dir=tmp_path)
    computed = teacher_module.teacher_outputs(str(classifier_dir), *texts, **options)
    assert sum(seen) == 32 and not computed.from_cache
    loaded = teacher_module.teacher_outputs(str(classifier_dir), *texts, **options)
    assert sum(seen) == 32 and loaded.from_cache
    assert torch.equal(loaded.train_logits, computed.train_logits)
    assert torch.equal(loaded.train_hidden, computed.train_hidden)
    assert loaded.validation_logits.shape == (2, 2)
    logits_only = teacher_module.teacher_outputs(str(classifier_dir), *texts, **{**options, "layers": []})
    assert sum(seen) == 32 and logits_only.from_cache  # the file with hidden states has the logits too
    assert torch.equal(logits_only.train_logits, computed.train_logits) and logits_only.train_hidden is None
    twice = teacher_module.teacher_outputs(str(classifier_dir), *texts, **{**options, "layers": [1, 1]})
    assert sum(seen) == 32 and twice.from_cache  # the layers asked for are among those a file kept
    assert torch.equal(twice.train_hidden, computed.train_hidden.expand(-1, 2, -1))


def test_a_changed_set_of_texts_takes_the_outputs_the_cache_holds_and_the_teacher_reads_the_rest(
        classifier_dir, tmp_path, monkeypatch):
    read = []  # the texts of each teacher pass
    run_teacher = teacher_module.run_teacher

    def counted(model, tokenizer, texts, *args, **kwargs):
        read.append(list(texts))
        return run_teacher(model, tokenizer, texts, *args, **kwargs)

    monkeypatch.setattr(teacher_module, "run_teacher", counted)
    options = dict(layers=[1], max_seq_length=32, batch_size=8, device=torch.device("cpu"), dtype=None)
    training = [f"good movie number {i}" for i in range(30)]
    teacher_module.teacher_outputs(str(classifier_dir), (training, None), (["a dull plot", "great"], None),
                                   cache_dir=tmp_path / "cache", **options)
    # "a dull plot" was a validation text, whose [CLS] states no file keeps: as a training text it is read again.
    grown = (training + ["a dull plot", "a new text", "another new one"], None), (["great", "brand new"], None)
    outputs = teacher_module.teacher_outputs(str(classifier_dir), *grown, cache_dir=tmp_path / "cache", **options)
    assert sorted(read[1]) == ["a dull plot", "a new text", "another new one", "brand new"]
    assert outputs.labelling["sentences"] == 4 and outputs.labelling["reused"] == 31 and not outputs.from_cache
    fresh = teacher_module.teacher_outputs(str(classifier_dir), *grown, cache_dir=tmp_path / "fresh", **options)
    assert len(read[2]) == 35 and fresh.labelling["reused"] == 0
    torch.testing.assert_close(outputs.train_logits, fresh.train_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outputs.validation_logits, fresh.validation_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outputs.train_hidden, fresh.train_hidden, rtol=1e-3, atol=1e-3)
    again = teacher_module.teacher_outputs(str(classifier_dir), *grown, cache_dir=tmp_path / "cache", **options)
    assert len(read) == 3 and again.from_cache  # the grown set's own file


def test_the_outputs_of_pairs_equal_a_forward_of_each_pair_alone_with_the_cls_states_in_the_order_asked(
        classifier_dir, tmp_path):
    outputs = teacher_outputs(str(classifier_dir), TRAIN, VALIDATION, layers=[2, 1], cache_dir=tmp_path, **OPTIONS)
    assert outputs.train_hidden.shape == (4, 2, 32) and outputs.train_hidden.dtype == torch.float16
    assert outputs.labelling["sentences"] == 6 and outputs.labelling["reused"] == 0
    model = BertForSequenceClassification.from_pretrained(classifier_dir).eval()
    tokenizer = load_tokenizer(classifier_dir)
    with torch.no_grad():
        for split, logits in ((TRAIN, outputs.train_logits), (VALIDATION, outputs.validation_logits)):
            for row, (text, pair) in enumerate(zip(*split)):
                encoding = tokenizer.encode(text, pair)
                fresh = model(torch.tensor([encoding.ids]), token_type_ids=torch.tensor([encoding.type_ids]),
                              output_hidden_states=True)
                torch.testing.assert_close(logits[row], fresh.logits[0], rtol=1e-5, atol=1e-5)
                if split is TRAIN:
                    cls = torch.stack([fresh.hidden_states[2][0, 0], fresh.hidden_states[1][0, 0]]).half()
                    torch.testing.assert_close(outputs.train_hidden[row], cls, rtol=1e-3, atol=1e-3)
    loaded = teacher_outputs(str(classifier_dir), TRAIN, VALIDATION, layers=[1], cache_dir=tmp_path, **OPTIONS)
    assert loaded.from_cache and loaded.cache_file == outputs.cache_file and loaded.labelling == outputs.labelling
    assert torch.equal(loaded.train_hidden, outputs.train_hidden[:, 1:])


def test_under_bf16_autocast_the_cls_states_are_kept_in_bf16_in_a_cache_file_of_their_own(classifier_dir, tmp_path):
    full = teacher_outputs(str(classifier_dir), TRAIN, VALIDATION, layers=[1], cache_dir=tmp_path, **OPTIONS)
    mixed = teacher_outputs(str(classifier_dir), TRAIN, VALIDATION, layers=[1], cache_dir=tmp_path,
                            **{**OPTIONS, "dtype": torch.bfloat16})
    assert not mixed.from_cache and mixed.cache_file != full.cache_file and mixed.labelling["reused"] == 0
    assert mixed.train_hidden.dtype == torch.bfloat16 and mixed.labelling["dtype"] == "bfloat16"
    assert mixed.train_logits.dtype == mixed.validation_logits.dtype == torch.float32
    torch.testing.assert_close(mixed.train_hidden.float(), full.train_hidden.float(), rtol=0.05, atol=0.1)


def test_a_retrained_teacher_in_the_same_folder_is_read_again_and_takes_nothing_from_the_old_files(
        classifier_dir, tmp_path):
    teacher = tmp_path / "teacher"
    shutil.copytree(classifier_dir, teacher)
    before = teacher_outputs(str(teacher), TRAIN, VALIDATION, layers=[1], cache_dir=tmp_path / "cache", **OPTIONS)
    perturbed(BertForSequenceClassification.from_pretrained(teacher), seed=1).save_pretrained(teacher)
    after = teacher_outputs(str(teacher), TRAIN, VALIDATION, layers=[1], cache_dir=tmp_path / "cache", **OPTIONS)
    assert not after.from_cache and after.cache_file != before.cache_file
    assert after.labelling["sentences"] == 6 and after.labelling["reused"] == 0
    assert not torch.allclose(after.train_logits, before.train_logits, rtol=1e-3, atol=1e-3)


def test_the_report_records_the_teacher_its_metrics_and_where_its_outputs_came_from(tmp_path):
    labelling = {"sentences": 6, "seconds": 0.5, "sentences_per_sec": 12.0, "device": "cpu", "dtype": "float32",
                 "reused": 2}
    outputs = TeacherOutputs(torch.zeros(4, 2), None, torch.zeros(2, 2), labelling,
                             tmp_path / "cache" / "teacher-abc-layers1.safetensors", from_cache=True)
    (tmp_path / "teacher.json").write_text("an earlier run's report")
    write_report(tmp_path, "runs/teacher/hf_model", outputs, {"accuracy": 0.75, "loss": 0.5})
    assert json.loads((tmp_path / "teacher.json").read_text()) == {
        "teacher": "runs/teacher/hf_model", "validation": {"accuracy": 0.75, "loss": 0.5}, "labelling": labelling,
        "cache_file": f"{tmp_path}/cache/teacher-abc-layers1.safetensors", "from_cache": True}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["teacher.json"]  # no temporary file left
