"""The catalogue of bad input: every mistake, through the real command line, ends in one line
`bertlab: error: …` naming the key, file or value (exit status 2 for a malformed command line, 1 for
the rest), no traceback, and leaves every existing file as it was — in particular a finished
pretraining run and a finished fine-tuning run that many of the commands are pointed at."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.bertlab_runs import FP32, QUIET, TINY_MODEL, fine_tuning, pretraining, run_in_process


@pytest.fixture(scope="module")
def runs(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished `train` run, a finished `fine-tune` run, broken copies of the classifier export, and
    a few files; their folder is checksummed around every case."""
    root = tmp_path_factory.mktemp("finished")
    cache = tmp_path_factory.mktemp("cache")  # outside `root`: successful set-up runs fill it
    paths = {"root": root, "data": tiny_data_dir, "pretrained": root / "pretrained", "fine_tuned": root / "fine_tuned"}
    outcome = run_in_process(pretraining(tiny_data_dir, cache, paths["pretrained"], "trainer.max_steps=4",
                                         "trainer.val_check_interval=2"))
    assert outcome.code == 0
    outcome = run_in_process(fine_tuning(tiny_data_dir, paths["pretrained"] / "hf_model", paths["fine_tuned"],
                                         "trainer.max_steps=4", "trainer.val_check_interval=2"))
    assert outcome.code == 0
    classifier = paths["fine_tuned"] / "hf_model"
    for name, change in BROKEN_CLASSIFIERS.items():
        shutil.copytree(classifier, root / name)
        change(root / name)
        paths[name] = root / name
    for name, change in BROKEN_ENCODERS.items():  # masked-LM exports whose encoder does not fit
        shutil.copytree(paths["pretrained"] / "hf_model", root / name)
        change(root / name)
        paths[name] = root / name
    for name, tags in BAD_TAGS.items():  # token datasets whose tags are refused
        (root / name).mkdir()
        for split in ("train", "validation"):
            pd.DataFrame({"tokens": [["anna", "visited", "paris"], ["the", "city"]] * 4,
                          "ner_tags": tags * 4}).to_parquet(root / name / f"{split}.parquet")
        paths[name] = root / name
    (root / "not_a_folder").write_text("")
    (root / "corrupt.ckpt").write_bytes(b"PK\x03\x04 not a checkpoint")
    results = root / "results"  # a folder of earlier results, and files of earlier results
    results.mkdir()
    for name in ("head_importance.csv", "compare.md", "attention_grid.png"):
        (results / name).write_text("earlier results\n")
    (root / "out.jsonl").write_text('{"text": "earlier"}\n')
    (root / "eval.json").write_text("{}\n")
    shutil.copytree(paths["pretrained"] / "hf_model", root / "corrupt_tokenizer")
    (root / "corrupt_tokenizer" / "tokenizer.json").write_text('{"model": {"type": "WordPi')
    paths["corrupt_tokenizer"] = root / "corrupt_tokenizer"
    return paths


def without_head(directory: Path) -> None:
    weights = load_file(directory / "model.safetensors")
    save_file({k: v for k, v in weights.items() if not k.startswith("classifier.")}, directory / "model.safetensors")


def renamed_head(directory: Path) -> None:
    weights = load_file(directory / "model.safetensors")
    save_file({k.replace("classifier.", "head."): v for k, v in weights.items()}, directory / "model.safetensors")


def edit_config(**values):
    def change(directory: Path) -> None:
        config = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps(config | values))
    return change


def truncate_weights(directory: Path) -> None:
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])


def changed_weights(change):
    def edit(directory: Path) -> None:
        weights = load_file(directory / "model.safetensors")
        save_file(change(weights), directory / "model.safetensors")
    return edit


def without_word_embeddings(weights: dict) -> dict:
    return {k: v for k, v in weights.items() if not k.endswith("embeddings.word_embeddings.weight")}


def renamed_query(weights: dict) -> dict:
    return {k.replace("attention.self.query.", "attention.self.querry."): v for k, v in weights.items()}


def extra_layer(weights: dict) -> dict:
    return weights | {k.replace("layer.0.", "layer.1."): v.clone() for k, v in weights.items() if "layer.0." in k}


BROKEN_ENCODERS = {"encoder_missing": changed_weights(without_word_embeddings),
                   "encoder_renamed": changed_weights(renamed_query),
                   "encoder_extra": changed_weights(extra_layer)}


BROKEN_CLASSIFIERS = {
    "no_head": without_head,
    "renamed_head": renamed_head,
    "absurd_width": edit_config(hidden_size=5_000_000),
    "absurd_memory": edit_config(hidden_size=65_536, intermediate_size=262_144, num_hidden_layers=1_000,
                                 num_attention_heads=64),
    "negative_layers": edit_config(num_hidden_layers=-2),
    "wider_than_weights": edit_config(hidden_size=64, intermediate_size=128),
    "truncated": truncate_weights,
    "classifier_renamed_encoder": changed_weights(renamed_query),
    "token_classifier": edit_config(architectures=["BertForTokenClassification"]),
}


def train(paths, *overrides: str, run: str = "pretrained") -> list[str]:
    return pretraining(paths["data"], paths["root"] / "cache", paths[run] if run in paths else paths["root"] / run,
                       "trainer.max_steps=2", *overrides)


def fine_tune(paths, *overrides: str, run: str = "fine_tuned") -> list[str]:
    return fine_tuning(paths["data"], paths["pretrained"] / "hf_model",
                       paths[run] if run in paths else paths["root"] / run, "trainer.max_steps=2", *overrides)


# Token datasets (two sentences, repeated) whose tag column is refused; tag ids of data=conll2003's label_names.
BAD_TAGS = {"tags_as_text": ["B-PER O B-LOC", "O O"], "tags_too_few": [[1, 0], [0, 0]],
            "tags_outside": [[1, 0, 12], [0, 0]], "tags_iob1_and_iob2": [[1, 0, 6], [0, 0]]}


def tag(paths, data: str, *overrides: str) -> list[str]:
    """`fine-tune` a token classifier from scratch on a token dataset of the root, with the pretrained vocabulary."""
    return ["fine-tune", "+recipe=conll2003_scratch", f"data.tokenizer={paths['pretrained'] / 'hf_model'}",
            f"data.source={paths[data] if data in paths else data}", *TINY_MODEL, "data.batch_size=4",
            "data.max_seq_length=32", "trainer.max_steps=2", *FP32, *QUIET,
            f"hydra.run.dir={paths['root'] / 'new' / 'run'}", *overrides]


def glue(paths, checkpoint: str, *overrides: str) -> list[str]:
    return ["glue", str(paths[checkpoint]), "tasks=sst2", "seeds=0", f"paths.output_dir={paths['root'] / 'suites'}",
            f"data.source={paths['data'] / 'sst2'}", *overrides]


def data(paths) -> list[str]:
    return ["--data", str(paths["data"] / "sst2")]


NOT_FITTING = "its encoder does not fit"
HOLDS = "choose a new folder, or add --overwrite to replace them"


def ckpt(paths, run: str) -> str:
    return str(paths[run] / "lightning_checkpoints" / "last.ckpt")


# (case, argv from the paths, exit status, a part of the message)
CASES = [
    # every config value checked against its declared range before anything runs
    ("negative lr", lambda p: train(p, "optimizer.lr=-1"), 1, "optimizer.lr=-1: must be in (0, inf)"),
    ("zero lr", lambda p: train(p, "optimizer.lr=0"), 1, "optimizer.lr=0: must be in (0, inf)"),
    ("eps above 1", lambda p: train(p, "optimizer.eps=2.0"), 1, "optimizer.eps=2.0: must be in (0, 1)"),
    ("negative weight decay", lambda p: train(p, "optimizer.weight_decay=-0.1"), 1,
     "optimizer.weight_decay=-0.1: must be in [0, inf)"),
    ("negative seed", lambda p: train(p, "seed=-1"), 1, "seed=-1: must be in [0, 4294967295]"),
    ("masking nothing", lambda p: train(p, "task.mlm_probability=0"), 1, "task.mlm_probability=0: must be in (0, 1)"),
    ("masking more than all", lambda p: train(p, "task.mlm_probability=1.5"), 1,
     "task.mlm_probability=1.5: must be in (0, 1)"),
    ("mask share above 1", lambda p: train(p, "task.mask_replace_prob=1.2"), 1,
     "task.mask_replace_prob=1.2: must be in [0, 1]"),
    ("negative random share", lambda p: train(p, "task.random_replace_prob=-0.1"), 1,
     "task.random_replace_prob=-0.1: must be in [0, 1]"),
    ("dropout of 1", lambda p: train(p, "task.dropout=1.0"), 1, "task.dropout=1.0: must be in [0, 1)"),
    ("warm-up longer than the run", lambda p: train(p, "scheduler.warmup_ratio=2"), 1,
     "scheduler.warmup_ratio=2: must be in [0, 1]"),
    ("unknown schedule", lambda p: train(p, "scheduler.schedule=step"), 1,
     "scheduler.schedule='step': must be one of linear, cosine, constant"),
    ("max_steps below -1", lambda p: train(p, "trainer.max_steps=-5"), 1, "trainer.max_steps=-5: must be in [-1, inf)"),
    ("validating every 0 steps", lambda p: train(p, "trainer.val_check_interval=0"), 1,
     "trainer.val_check_interval=0: must be in (0, inf)"),
    ("accumulating 0 batches", lambda p: train(p, "trainer.accumulate_grad_batches=0"), 1,
     "trainer.accumulate_grad_batches=0: must be in [1, inf)"),
    ("negative clipping", lambda p: train(p, "trainer.gradient_clip_val=-1"), 1,
     "trainer.gradient_clip_val=-1: must be in [0, inf)"),
    ("logging every 0 steps", lambda p: train(p, "trainer.log_every_n_steps=0"), 1,
     "trainer.log_every_n_steps=0: must be in [1, inf)"),
    ("unknown precision", lambda p: train(p, "trainer.precision=fp8"), 1,
     "trainer.precision='fp8': must be one of 32-true"),
    ("unknown accelerator", lambda p: train(p, "trainer.accelerator=quantum"), 1,
     "trainer.accelerator='quantum': must be one of cpu, gpu"),
    ("zero devices", lambda p: train(p, "trainer.devices=0"), 1, "trainer.devices=0: must be in [1, 65536]"),
    ("negative validation batches", lambda p: train(p, "trainer.limit_val_batches=-1"), 1,
     "trainer.limit_val_batches=-1: must be in [0, inf)"),
    ("empty batches", lambda p: train(p, "data.batch_size=0"), 1, "data.batch_size=0: must be in [1, inf)"),
    ("sequences too short", lambda p: train(p, "data.max_seq_length=4"), 1,
     "data.max_seq_length=4: must be in [8, 1048576]"),
    ("short-sequence share above 1", lambda p: train(p, "data.short_seq_prob=1.5"), 1,
     "data.short_seq_prob=1.5: must be in [0, 1]"),
    ("copied pairs with next-sentence prediction", lambda p: train(p, "data.copy_pair_prob=0.5", "task.nsp=true",
                                                                   run="new_run"), 1,
     "data.copy_pair_prob=0.5 with next-sentence prediction"),
    ("a compile mode without compiling", lambda p: train(p, "task.compile_mode=reduce-overhead", run="new_run"), 1,
     "task.compile_mode=reduce-overhead needs task.compile=true"),
    ("unknown compile mode", lambda p: train(p, "task.compile=true", "task.compile_mode=fast"), 1,
     "task.compile_mode='fast': must be one of default, reduce-overhead"),
    ("copied pairs above 1", lambda p: train(p, "data.copy_pair_prob=1.5"), 1,
     "data.copy_pair_prob=1.5: must be in [0, 1]"),
    ("negative workers", lambda p: train(p, "data.num_workers=-1"), 1, "data.num_workers=-1: must be in [0, 1024]"),
    ("no training lines", lambda p: train(p, "data.max_train_lines=0"), 1, "data.max_train_lines=0: must be in [1, inf)"),
    ("vocabulary of 5", lambda p: train(p, "tokenizer.vocab_size=5"), 1,
     "tokenizer.vocab_size=5: must be in [10, 1000000]"),
    ("keeping -2 checkpoints", lambda p: train(p, "callbacks.checkpoint.save_top_k=-2"), 1,
     "callbacks.checkpoint.save_top_k=-2: must be in [-1, inf)"),
    ("throughput window of 1", lambda p: train(p, "callbacks.throughput.window_size=1"), 1,
     "callbacks.throughput.window_size=1: must be in [2, inf)"),
    ("zero width", lambda p: train(p, "model.hidden_size=0"), 1, "model config: hidden_size must be a positive integer, got 0"),
    ("100,000 layers", lambda p: train(p, "model.num_hidden_layers=100000"), 1,
     "model config: num_hidden_layers is 100,000; bertlab accepts at most 1,000"),
    ("dropout of 1 in the model", lambda p: train(p, "model.hidden_dropout_prob=1.0"), 1,
     "model config: hidden_dropout_prob must be in [0, 1), got 1.0"),
    ("a model larger than memory", lambda p: train(p, "model.hidden_size=16384", "model.num_attention_heads=16",
                                                   "model.intermediate_size=65536", "model.num_hidden_layers=200"), 1,
     "more than this machine's"),
    ("zero layer-norm epsilon", lambda p: train(p, "model.layer_norm_eps=0"), 1,
     "model config: layer_norm_eps must be positive, got 0"),
    # types and names, checked by Hydra's schema and the `_target_` signatures
    ("width not a number", lambda p: train(p, "model.hidden_size=abc"), 1,
     "model.hidden_size='abc': expected int (like the default 32), got str"),
    ("steps not a number", lambda p: train(p, "trainer.max_steps=abc"), 1,
     "trainer.max_steps='abc': must be a number in [-1, inf)"),
    ("rate not a number", lambda p: train(p, "optimizer.lr=abc"), 1,
     "optimizer.lr='abc': must be a number in (0, inf)"),
    ("fractional seed", lambda p: train(p, "seed=1.5"), 1, "seed=1.5: expected int (like the default 0), got float"),
    ("unknown model key", lambda p: train(p, "model.colour=red"), 1, "unknown config key 'model.colour'; 'model' has:"),
    ("unknown model key added", lambda p: train(p, "+model.colour=red"), 1,
     "unknown config key 'model.colour'; the model group takes the fields of bertlab.BertConfig"),
    ("misspelt trainer key", lambda p: train(p, "trainer.max_stepz=5"), 1, "unknown config key 'trainer.max_stepz'"),
    # fine-tuning values
    ("layer-wise decay of 0", lambda p: fine_tune(p, "task.layerwise_lr_decay=0"), 1,
     "task.layerwise_lr_decay=0: must be in (0, 1]"),
    ("empty evaluation batches", lambda p: fine_tune(p, "data.eval_batch_size=0"), 1,
     "data.eval_batch_size=0: must be in [1, inf)"),
    ("no labels", lambda p: fine_tune(p, "data.num_labels=0"), 1, "data.num_labels=0: must be in [1, 100000]"),
    ("unknown monitor mode", lambda p: fine_tune(p, "monitor_mode=biggest"), 1,
     "monitor_mode='biggest': must be one of min, max"),
    ("no training samples", lambda p: fine_tune(p, "data.limit_train_samples=0"), 1,
     "data.limit_train_samples=0: must be in [1, inf)"),
    # a loaded model keeps its architecture
    ("layers with init_from", lambda p: fine_tune(p, f"model.init_from={p['pretrained'] / 'hf_model'}",
                                                  "model.num_hidden_layers=4", run="new"), 1,
     "model.num_hidden_layers cannot change a model loaded with model.init_from="),
    ("size group with init_from", lambda p: fine_tune(p, f"model.init_from={p['pretrained'] / 'hf_model'}",
                                                      "model=bert_mini", run="new"), 1,
     "model cannot change a model loaded with model.init_from="),
    ("vocabulary with init_from",
     lambda p: ["train", "+recipe=mlm_tiny", f"model.init_from={p['pretrained'] / 'hf_model'}",
                "tokenizer.vocab_size=100", f"hydra.run.dir={p['root'] / 'new'}"], 1,
     "tokenizer.vocab_size cannot change a model loaded with model.init_from="),
    # finished runs are never written into, except by resuming them
    ("train into a finished run", lambda p: train(p), 1, "already holds a run (hf_model, lightning_checkpoints, "
                                                         "metrics.csv); choose a new folder, or continue that run"),
    ("fine-tune into a finished run", lambda p: fine_tune(p, run="pretrained"), 1, "already holds a run"),
    ("resume a fine-tuning checkpoint in train", lambda p: train(p, f"resume={ckpt(p, 'fine_tuned')}", run="new"), 1,
     "was saved by ClassificationModule (fine-tune), not by this run's PretrainingModule"),
    ("resume a pretraining checkpoint in fine-tune",
     lambda p: fine_tune(p, f"resume={ckpt(p, 'pretrained')}", run="new"), 1,
     "was saved by PretrainingModule (train), not by this run's ClassificationModule"),
    ("resume another width", lambda p: train(p, f"resume={ckpt(p, 'pretrained')}", "model.hidden_size=64",
                                             run="new"), 1,
     "does not fit this run: model.hidden_size (run 64, checkpoint 32)"),
    ("resume without NSP", lambda p: train(p, f"resume={ckpt(p, 'pretrained')}", "task=mlm_nsp", run="new"), 1,
     "task.nsp (run True, checkpoint False)"),
    ("resume another label count", lambda p: fine_tune(p, f"resume={ckpt(p, 'fine_tuned')}", "data.num_labels=3",
                                                       "data.label_names=[a,b,c]", run="new"), 1,
     "data.num_labels (run 3, checkpoint 2)"),
    ("resume a missing file", lambda p: train(p, "resume=/no/such/last.ckpt", run="new"), 1,
     "resume='/no/such/last.ckpt': no checkpoint at /no/such/last.ckpt"),
    ("resume a corrupted file", lambda p: train(p, f"resume={p['root'] / 'corrupt.ckpt'}", run="new"), 1,
     "corrupt.ckpt: not a readable Lightning checkpoint, truncated or corrupted?"),
    ("resume a folder without checkpoints", lambda p: train(p, f"resume={p['no_head']}", run="new"), 1,
     "lightning_checkpoints/last.ckpt; expected a Lightning .ckpt file or a run folder"),
    ("output below a file", lambda p: train(p, run="not_a_folder/run"), 1, "cannot be created:"),
    # evaluate and predict need a trained classifier and well-formed options
    ("evaluate a masked-LM export",
     lambda p: ["evaluate", str(p["pretrained"] / "hf_model"), "--data", str(p["data"] / "sst2")], 1,
     "hf_model: no trained classifier head ("),
    ("predict with a masked-LM export", lambda p: ["predict", str(p["pretrained"] / "hf_model"), "good"], 1,
     "no trained classifier head"),
    ("predict without head tensors", lambda p: ["predict", str(p["no_head"]), "good"], 1, "no trained classifier head"),
    ("predict with renamed head tensors", lambda p: ["predict", str(p["renamed_head"]), "good"], 1,
     "no trained classifier head"),
    ("predict in batches of 0", lambda p: ["predict", str(p["fine_tuned"] / "hf_model"), "good", "--batch-size", "0"], 2,
     "argument --batch-size: expected a positive integer, got 0"),
    ("predict into a missing folder",
     lambda p: ["predict", str(p["fine_tuned"] / "hf_model"), "good", "--output", "/no/such/dir/out.jsonl"], 2,
     "/no/such/dir/out.jsonl: its folder /no/such/dir does not exist"),
    ("predict into a .txt", lambda p: ["predict", str(p["fine_tuned"] / "hf_model"), "good", "--output",
                                       str(p["root"] / "out.txt")], 2, "expected a .jsonl or .csv file name"),
    ("predict without a checkpoint", lambda p: ["predict"], 2, "the following arguments are required: checkpoint"),
    ("predict nothing", lambda p: ["predict", str(p["fine_tuned"] / "hf_model")], 2, "nothing to classify"),
    ("predict from a missing file", lambda p: ["predict", str(p["fine_tuned"] / "hf_model"), "--file", "/no/such.txt"],
     1, "--file /no/such.txt: no such file"),
    ("predict with a missing checkpoint", lambda p: ["predict", "/no/such/model", "good"], 1,
     "/no/such/model: not a checkpoint directory"),
    ("evaluate without data of a folder beside no run", lambda p: ["evaluate", str(p["no_head"])], 2,
     "give --data (a hub id such as stanfordnlp/sst2, a folder of split files or a file): "),
    ("predict with a --pair for some texts only",
     lambda p: ["predict", str(p["fine_tuned"]), "good", "bad", "--pair", "fine"], 2,
     "--pair given 1 time(s) for 2 text(s): give one --pair per text"),
    ("predict pairs from a column without a file",
     lambda p: ["predict", str(p["fine_tuned"]), "good", "--text-pair-column", "sentence2"], 2,
     "--text-pair-column sentence2: it names a column of --file, and no --file is given"),
    ("predict pairs from a .txt file",
     lambda p: ["predict", str(p["fine_tuned"]), "--file", "/no/such.txt", "--text-pair-column", "sentence2"], 2,
     "a .txt --file has no columns"),
    ("compare a pretraining run with a classifier",
     lambda p: ["compare", str(p["pretrained"]), str(p["fine_tuned"]), "--output", str(p["root"] / "new")], 1,
     "compare: runs of different kinds (1: "),
    ("evaluate a missing split",
     lambda p: ["evaluate", str(p["fine_tuned"] / "hf_model"), "--data", str(p["data"] / "sst2"), "--split", "nope"], 1,
     "has no split 'nope'"),
    ("evaluate into a missing folder",
     lambda p: ["evaluate", str(p["fine_tuned"] / "hf_model"), "--data", str(p["data"] / "sst2"), "--output",
                "/no/such/eval.json"], 2, "its folder /no/such does not exist"),
    # untrusted checkpoint files
    ("config.json of absurd width", lambda p: ["predict", str(p["absurd_width"]), "good"], 1,
     "config.json: model config: hidden_size is 5,000,000; bertlab accepts at most 65,536"),
    ("config.json beyond memory", lambda p: ["predict", str(p["absurd_memory"]), "good"], 1,
     "config.json: model config: its"),
    ("config.json with negative layers", lambda p: ["predict", str(p["negative_layers"]), "good"], 1,
     "num_hidden_layers must be a positive integer, got -2"),
    ("config.json wider than the weights", lambda p: ["predict", str(p["wider_than_weights"]), "good"], 1,
     "tensor(s) do not fit the model config"),
    ("truncated weights", lambda p: ["predict", str(p["truncated"]), "good"], 1,
     "model.safetensors: unreadable safetensors file, truncated or corrupted"),
    # the command line itself
    ("unknown flag", lambda p: ["train", "-x"], 2, "command line: unknown flag -x"),
    ("--cfg without a value", lambda p: ["train", "--cfg"], 2, "command line: --cfg needs a value (job, hydra, all)"),
    ("unknown command", lambda p: ["frobnicate"], 2, "unknown command 'frobnicate'"),
    ("bench of an unknown size", lambda p: ["bench", "--sizes", "bert_huge"], 2, "--sizes: unknown bert_huge"),
    ("summarize a missing folder", lambda p: ["summarize", "/no/such/sweep"], 1, "/no/such/sweep: no runs"),
    # 1. weights that do not fit: encoder tensors missing, renamed, extra; refused before any folder or data
    ("fine-tune from an export without word embeddings",
     lambda p: fine_tune(p, f"model.init_from={p['encoder_missing']}", run="new"), 1,
     f"{NOT_FITTING} BertModel (missing embeddings.word_embeddings.weight); those tensors would start from random "
     f"weights. Use a checkpoint of this architecture, or model.allow_reinitialised=true"),
    ("fine-tune from an export with a renamed tensor",
     lambda p: fine_tune(p, f"model.init_from={p['encoder_renamed']}", run="new"), 1,
     "(missing encoder.layer.{0}.attention.self.query.bias, encoder.layer.{0}.attention.self.query.weight; "
     "unexpected encoder.layer.{0}.attention.self.querry.bias, encoder.layer.{0}.attention.self.querry.weight)"),
    ("continue pretraining an export with an extra layer",
     lambda p: ["train", "+recipe=mlm_tiny", f"model.init_from={p['encoder_extra']}", f"data.source={p['data'] / 'corpus'}",
                f"hydra.run.dir={p['root'] / 'new'}"], 1,
     "(unexpected encoder.layer.{1}.attention.output.LayerNorm.bias"),
    ("embedding distillation of a student without word embeddings",
     lambda p: ["train", "+recipe=embed_distill_tiny", f"model.init_from={p['encoder_missing']}",
                f"task.teacher={p['pretrained'] / 'hf_model'}", f"data.source={p['data'] / 'corpus'}",
                f"hydra.run.dir={p['root'] / 'new'}"], 1, NOT_FITTING + " BertModel (missing embeddings.word_embeddings.weight)"),
    ("distil from a teacher with a renamed encoder tensor",
     lambda p: fine_tune(p, "task=distill", f"task.teacher={p['classifier_renamed_encoder']}", run="new"), 1,
     NOT_FITTING + " BertModel (missing encoder.layer.{0}"),
    ("glue of an export without word embeddings", lambda p: glue(p, "encoder_missing"), 1,
     f"{NOT_FITTING} BertModel (missing embeddings.word_embeddings.weight)"),
    ("predict with a renamed encoder tensor", lambda p: ["predict", str(p["classifier_renamed_encoder"]), "good"], 1,
     f"{NOT_FITTING} BertForSequenceClassification (missing bert.encoder.layer.{{0}}.attention.self.query.bias"),
    ("evaluate with a renamed encoder tensor",
     lambda p: ["evaluate", str(p["classifier_renamed_encoder"]), *data(p)], 1,
     "or --allow-reinitialised to train them from scratch"),
    ("heads of a renamed encoder tensor", lambda p: ["heads", str(p["classifier_renamed_encoder"]), *data(p)], 1,
     NOT_FITTING),
    ("attention of an export with a renamed tensor", lambda p: ["attention", str(p["encoder_renamed"]), "good",
                                                                "--output", str(p["root"] / "new")], 1,
     f"{NOT_FITTING} BertModel (missing encoder.layer.{{0}}.attention.self.query.bias"),
    ("shrink an export with an extra layer",
     lambda p: ["shrink", str(p["encoder_extra"]), "--layers", "1", "--hidden", "16", "--heads", "1", "--output",
                str(p["root"] / "new")], 1, f"{NOT_FITTING} BertForMaskedLM (unexpected"),
    # 2. a folder or file that holds work is not overwritten without --overwrite
    ("shrink into a model folder",
     lambda p: ["shrink", str(p["pretrained"]), "--layers", "1", "--hidden", "16", "--heads", "1", "--output",
                str(p["fine_tuned"] / "hf_model")], 1,
     "hf_model already holds a model (config.json, model.safetensors); " + HOLDS),
    ("heads export into a model folder",
     lambda p: ["heads", str(p["fine_tuned"]), *data(p), "--export", str(p["pretrained"] / "hf_model")], 1,
     "hf_model already holds a model (config.json, model.safetensors); " + HOLDS),
    ("heads results over earlier results",
     lambda p: ["heads", str(p["fine_tuned"]), *data(p), "--output", str(p["root"] / "results")], 1,
     "results already holds results (head_importance.csv); " + HOLDS),
    ("attention maps over earlier maps",
     lambda p: ["attention", str(p["pretrained"]), "good", "--output", str(p["root"] / "results")], 1,
     "results already holds results (attention_grid.png); " + HOLDS),
    ("compare over an earlier comparison",
     lambda p: ["compare", str(p["pretrained"]), str(p["fine_tuned"]), "--output", str(p["root"] / "results")], 1,
     "results already holds results (compare.md); " + HOLDS),
    ("predict over an earlier file",
     lambda p: ["predict", str(p["fine_tuned"]), "good", "--output", str(p["root"] / "out.jsonl")], 1,
     "out.jsonl already holds results (out.jsonl); choose a new file, or add --overwrite to replace it"),
    ("evaluate over an earlier file",
     lambda p: ["evaluate", str(p["fine_tuned"]), *data(p), "--output", str(p["root"] / "eval.json")], 1,
     "eval.json already holds results (eval.json); choose a new file, or add --overwrite"),
    # 3. a key that nothing reads
    ("an added top-level key", lambda p: train(p, "+max_epochs=3", run="new"), 1,
     "unknown config key 'max_epochs': nothing in bertlab reads it; did you mean trainer.max_epochs?"),
    ("a forced top-level key", lambda p: fine_tune(p, "++max_epochs=3", run="new"), 1,
     "unknown config key 'max_epochs': nothing in bertlab reads it; did you mean trainer.max_epochs?"),
    ("an added misspelt trainer key", lambda p: fine_tune(p, "+trainer.max_epoch=3", run="new"), 1,
     "unknown config key 'trainer.max_epoch': nothing in bertlab reads it; did you mean trainer.max_epochs?"),
    ("an added callback argument", lambda p: train(p, "+callbacks.checkpoint.every=2", run="new"), 1,
     "unknown config key 'callbacks.checkpoint.every'"),
    ("an added logger argument", lambda p: train(p, "+logger.csv.flush=1", run="new"), 1,
     "unknown config key 'logger.csv.flush'"),
    ("an added optimizer argument", lambda p: fine_tune(p, "+optimizer.betaz=[0.9,0.9]", run="new"), 1,
     "unknown config key 'optimizer.betaz': nothing in bertlab reads it; did you mean optimizer.betas?"),
    ("an added scheduler argument", lambda p: train(p, "+scheduler.warmup=10", run="new"), 1,
     "unknown config key 'scheduler.warmup'"),
    ("an added task argument", lambda p: fine_tune(p, "+task.frozen=[x]", run="new"), 1,
     "unknown config key 'task.frozen'"),
    ("an added data argument", lambda p: train(p, "+data.shuffle=false", run="new"), 1,
     "unknown config key 'data.shuffle'"),
    ("an added paths key", lambda p: train(p, "+paths.scratch=/tmp", run="new"), 1,
     "unknown config key 'paths.scratch'"),
    ("an added glue key", lambda p: fine_tune(p, "+glue=sst2", "+glue.metric=f1", run="new"), 1,
     "unknown config key 'glue.metric': nothing in bertlab reads it; did you mean glue.metrics?"),
    ("an added tokenizer key", lambda p: train(p, "+tokenizer.lower=true", run="new"), 1,
     "unknown config key 'tokenizer.lower'"),
    ("a misspelt transfer setting", lambda p: fine_tune(p, "task=distill", f"task.teacher={p['fine_tuned']}/hf_model",
                                                        "+data.transfer.copiez=2", run="new"), 1,
     "data.transfer.copiez: not a transfer set setting"),
    # 4. errors from inside a plugin or a library, and outputs that cannot be created
    ("an Optuna search space Optuna refuses",
     lambda p: ["fine-tune", "+recipe=sst2_optuna", "-m", "optimizer.lr=tag(log, interval(0, 1e-3))",
                f"model.init_from={p['pretrained'] / 'hf_model'}", f"hydra.sweep.dir={p['root'] / 'new'}"], 1,
     "optimizer.lr=tag(log, interval(0, 1e-3)): not a search space Optuna accepts (The `low` value must be larger "
     "than 0 for a log distribution"),
    ("shrink into a folder below a file",
     lambda p: ["shrink", str(p["pretrained"]), "--layers", "1", "--hidden", "16", "--heads", "1", "--output",
                str(p["root"] / "not_a_folder" / "small")], 1,
     "not_a_folder is not a folder; choose another with --output"),
    ("heads results below a file",
     lambda p: ["heads", str(p["fine_tuned"]), *data(p), "--output", str(p["root"] / "not_a_folder" / "heads")], 1,
     "is not a folder; choose another with --output"),
    ("compare into a folder below a file",
     lambda p: ["compare", str(p["pretrained"]), "--output", str(p["root"] / "not_a_folder" / "cmp")], 1,
     "is not a folder; choose another with --output"),
    # 5. refused after Hydra made the run folder: nothing it created is left (the checksums see any new folder)
    ("distil from a masked-LM teacher", lambda p: fine_tune(p, "task=distill", f"task.teacher={p['pretrained']}/hf_model",
                                                            run="new"), 1, "not a trained classifier"),
    ("freeze a pattern that matches nothing", lambda p: fine_tune(p, "task.freeze=[nothing.*]", run="new/run"), 1,
     "task.freeze: 'nothing.*' matches no parameter of the model"),
    ("a validation source that does not exist",  # its corpus, already read, is cached outside the checksummed folder
     lambda p: pretraining(p["data"], p["root"].parent / "outside_cache", p["root"] / "new" / "run", "trainer.max_steps=2",
                           "+data.validation_source=/no/such/text.txt"), 1, "/no/such/text.txt"),
    ("a corrupt tokenizer.json", lambda p: fine_tune(p, f"data.tokenizer={p['corrupt_tokenizer']}", run="new/run"), 1,
     "corrupt_tokenizer"),
    ("fine-tune from a missing checkpoint", lambda p: fine_tune(p, "model.init_from=/no/such/model", run="new"), 1,
     "model.init_from=/no/such/model: no such checkpoint folder"),
    # the commands that read a tokenizer only, or build data only
    ("tokenize with a missing tokenizer", lambda p: ["tokenize", "/no/such/tokenizer", "good"], 1,
     "tokenizer path /no/such/tokenizer does not exist"),
    ("tokenize with a corrupt tokenizer.json", lambda p: ["tokenize", str(p["corrupt_tokenizer"]), "good"], 1,
     "corrupt_tokenizer/tokenizer.json: "),
    ("tokenize nothing", lambda p: ["tokenize", str(p["pretrained"]), " "], 2, "the text is empty"),
    ("prepare the data of a fine-tuning recipe", lambda p: ["prepare-data", "+recipe=sst2"], 1,
     "this recipe is for `python -m bertlab fine-tune`"),
    ("prepare data with a key nothing reads", lambda p: ["prepare-data", "+recipe=mlm_tiny", "+max_steps=3"], 1,
     "unknown config key 'max_steps': nothing in bertlab reads it; did you mean trainer.max_steps?"),
    # token classification: the tags of each row, and task, data and checkpoint that go together
    ("tags that are no list", lambda p: tag(p, "tags_as_text"), 1,
     "column 'ner_tags' of split 'train' of"),
    ("fewer tags than words", lambda p: tag(p, "tags_too_few"), 1, "holds 2 tags at row 0 for its 3 words"),
    ("a tag outside the tag set", lambda p: tag(p, "tags_outside"), 1,
     "holds tag 12 at row 0, which is not one of label_names"),
    ("IOB1 rows beside IOB2 rows", lambda p: tag(p, "tags_iob1_and_iob2"), 1,
     "mixes IOB schemes: row 0 opens an entity with 'I-LOC' (IOB1) and row 0 with 'B-PER'"),
    ("tag names of two schemes", lambda p: tag(p, "tags_too_few", "data.label_names=[O,S-PER,L-PER]"), 1,
     "data.label_names mix tagging schemes: 'S-PER' (IOBES) beside 'L-PER' (BILOU)"),
    ("tagged words with the sentence task", lambda p: tag(p, "tags_too_few", "task=classification"), 1,
     "holds a tag per word: fine-tune it with task=token_classification"),
    ("sentences with the token task", lambda p: fine_tune(p, "task=token_classification", run="new/run"), 1,
     "task=token_classification tags words: give it a token dataset such as data=conll2003"),
    ("a token classifier given to heads", lambda p: ["heads", str(p["token_classifier"]), *data(p)], 1,
     "a token classifier (BertForTokenClassification), not a sentence classifier"),
    *([("a GPU run on a machine without one", lambda p: train(p, "trainer.accelerator=gpu", run="new"), 1,
        "trainer.accelerator=gpu: this machine has no GPU that torch can use")] if not torch.cuda.is_available() else []),
]


def checksums(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            for path in sorted(root.rglob("*"))}


def test_the_catalogue_is_large():
    assert len(CASES) >= 60 and len({case for case, *_ in CASES}) == len(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("case, argv, code, expected", CASES, ids=[case for case, *_ in CASES])
def test_bad_input_is_one_line_and_changes_nothing(case, argv, code, expected, runs, capsys):
    before = checksums(runs["root"]) | {f"data/{k}": v for k, v in checksums(runs["data"]).items()}
    outcome = run_in_process(argv(runs), capsys)
    assert outcome.code == code, outcome
    assert outcome.error_lines and outcome.error_lines[-1].startswith("bertlab: error: "), outcome.err
    assert [line for line in outcome.error_lines if "error:" in line] == outcome.error_lines[-1:], outcome.err
    assert expected in outcome.error_lines[-1], outcome.error_lines[-1]
    assert "Traceback" not in outcome.out + outcome.err
    after = checksums(runs["root"]) | {f"data/{k}": v for k, v in checksums(runs["data"]).items()}
    assert after == before


@pytest.mark.slow
def test_a_failed_resume_keeps_the_results_of_the_run(runs, capsys):
    """Resuming may write into a finished run's folder, but one that fails before training (here:
    its corpus is gone) leaves its results, metrics and config as they were (Hydra's own .hydra/
    and log file record the attempt)."""
    def results() -> dict[str, str]:
        return {name: value for name, value in checksums(runs["pretrained"]).items()
                if not name.startswith(".hydra") and not name.endswith(".log")}

    before = results()
    outcome = run_in_process(train(runs, "resume=auto", "data.source=/no/such/corpus"), capsys)
    assert outcome.code == 1 and "'/no/such/corpus' does not exist" in outcome.error_lines[-1], outcome.err
    assert results() == before


def test_a_checkpoint_whose_encoder_does_not_fit_is_used_when_the_user_asks_for_it(runs, tmp_path, capsys):
    outcome = run_in_process(["predict", str(runs["classifier_renamed_encoder"]), "good", "--allow-reinitialised"],
                             capsys)
    assert outcome.code == 0, outcome
    assert '"label"' in outcome.out
    outcome = run_in_process(fine_tune(runs, f"model.init_from={runs['encoder_missing']}", "model.allow_reinitialised=true",
                                       "trainer.max_steps=1", run=str(tmp_path / "allowed")), capsys)
    assert outcome.code == 0, outcome
    assert (tmp_path / "allowed" / "hf_model" / "model.safetensors").is_file()


def test_overwrite_replaces_the_results_an_output_holds(runs, tmp_path, capsys):
    output = tmp_path / "out.jsonl"
    output.write_text("earlier\n")
    outcome = run_in_process(["predict", str(runs["fine_tuned"]), "good", "--output", str(output), "--overwrite"], capsys)
    assert outcome.code == 0, outcome
    assert json.loads(output.read_text().splitlines()[0])["text"] == "good"


def test_a_sweep_whose_jobs_are_all_refused_leaves_no_folder(runs, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    outcome = run_in_process(fine_tune(runs, "-m", "seed=1,2", "model.init_from=/no/such/model",
                                       f"hydra.sweep.dir={sweep}", run=str(tmp_path / "unused")), capsys)
    assert outcome.code == 1 and "no such checkpoint folder" in outcome.error_lines[-1], outcome.err
    assert not sweep.exists()
