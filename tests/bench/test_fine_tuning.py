"""The SST-2 fine-tuning rows of the bench (bertlab.bench.fine_tuning): both systems read the same pieces and labels,
transformers' batches padded to their longest row or to max_seq_length (a quarter of the steps), the same batches
every repeat, bertlab training the checkpoint it loads, and a row per system against dynamic padding."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bertlab.bench import fine_tuning
from bertlab.bench.clock import Timing
from bertlab.bench.fine_tuning import DYNAMIC, FineTuneSetup, fixed_name, fixed_steps
from bertlab.bench.training import ADAMW
from bertlab.model import BertForSequenceClassification
from tests.bench.test_training import recording_loops

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def setup(tiny_data_dir: Path, classifier_dir: Path) -> FineTuneSetup:
    pytest.importorskip("transformers")
    return FineTuneSetup(tiny_data_dir / "sst2", str(classifier_dir), "a tiny BERT", CPU, steps=4, warmup=1,
                         batch_size=4, max_seq_length=64)


def test_fixed_padding_runs_a_quarter_of_the_steps_and_at_least_one():
    def setup_of(steps: int) -> FineTuneSetup:
        return FineTuneSetup(Path("sst2"), "model", "name", CPU, steps=steps, warmup=1, max_seq_length=96)

    assert [fixed_steps(setup_of(steps)) for steps in (1, 3, 4, 7, 8, 100)] == [1, 1, 1, 1, 2, 25]
    assert fixed_name(setup_of(8)) == "transformers, padding to 96"


def test_both_systems_read_the_same_pieces_and_labels(setup):
    short = replace(setup, max_seq_length=24)
    ours = fine_tuning.bertlab_data(short).datasets["train"]
    theirs, _ = fine_tuning.transformers_data(short)
    assert sorted(theirs.column_names) == ["attention_mask", "input_ids", "labels", "token_type_ids"]
    assert [list(ids) for ids in ours["input_ids"]] == theirs["input_ids"]
    assert list(ours["labels"]) == theirs["labels"]
    lengths = [len(ids) for ids in theirs["input_ids"]]
    assert max(lengths) == 24 and min(lengths) < 24  # the longer sentences truncated, the others left unpadded


def test_transformers_batches_are_padded_to_their_longest_row_or_to_max_seq_length_the_same_every_repeat(
        monkeypatch, setup):
    transformers = pytest.importorskip("transformers")
    loops, batches = recording_loops(monkeypatch, fine_tuning)
    train, tokenizer = fine_tuning.transformers_data(setup)
    measured = fine_tuning.transformers_measurements(setup, train, tokenizer, "fp32")
    assert list(measured) == [DYNAMIC, "transformers, padding to 64"]
    assert [steps for _, steps in measured.values()] == [4, 1]
    assert len(loops) == 1 and isinstance(loops[0].model, transformers.BertForSequenceClassification)

    def repeat(name: str) -> list[dict[str, torch.Tensor]]:
        batches.clear()
        measure, _ = measured[name]
        assert measure() > 0
        return list(batches)

    dynamic, fixed = repeat(DYNAMIC), repeat(fixed_name(setup))
    assert len(dynamic) == 1 + 4 and len(fixed) == 1 + 1  # the warm-up batch, then the timed ones
    widths = [batch["input_ids"].shape[1] for batch in dynamic]
    assert widths == [batch["attention_mask"].sum(1).max().item() for batch in dynamic] and min(widths) < 64
    assert all(batch["input_ids"].shape == (4, 64) for batch in fixed)
    for first, again in ((dynamic, repeat(DYNAMIC)), (fixed, repeat(fixed_name(setup)))):
        assert all(torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
                   for a, b in zip(first, again, strict=True))


def test_bertlab_times_fit_steps_on_the_checkpoint_it_loads(monkeypatch, setup):
    fits = []
    monkeypatch.setattr(fine_tuning, "fit_steps", lambda module, device, precision, steps, warmup, **inputs: (
        fits.append((module, device, precision, steps, warmup, inputs)) or SimpleNamespace(seconds=0.25)))
    datamodule = object()
    measure = fine_tuning.bertlab_measurement(setup, datamodule, "bf16")
    assert measure() == 0.25
    module, device, precision, steps, warmup, inputs = fits[0]
    assert (device, precision, steps, warmup, inputs) == (CPU, "bf16", 4, 1, {"datamodule": datamodule})
    loaded = BertForSequenceClassification.from_pretrained(setup.model_dir).state_dict()
    trained = module.model.state_dict()
    assert list(trained) == list(loaded) and all(torch.equal(trained[name], loaded[name]) for name in loaded)
    assert module.optimizer_factory.func is torch.optim.AdamW and module.optimizer_factory.keywords == ADAMW


def test_each_precision_gives_a_row_per_system_against_dynamic_padding(monkeypatch, setup):
    monkeypatch.setattr(fine_tuning, "interleave", lambda measurements, repeats: {
        name: Timing([0.5] * repeats) for name in measurements})
    results = fine_tuning.compare(setup, ["fp32", "bf16"], repeats=2)
    names = ["bertlab", DYNAMIC, "transformers, padding to 64"]
    assert [(r.precision, r.system) for r in results] == [(p, name) for p in ("fp32", "bf16") for name in names]
    assert all(r.section == "fine-tuning" and r.case == "sst2" and r.baseline == DYNAMIC for r in results)
    # 4 steps of 4 examples, the fixed padding's 1 step of 4, each in 0.5 s
    assert [(r.steps, r.work, r.throughput) for r in results[:3]] == [(4, 16, 32.0), (4, 16, 32.0), (1, 4, 8.0)]
    assert "4 steps per repeat (1 with fixed padding) after 1 untimed" in results[0].setting
