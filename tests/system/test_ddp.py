"""Data parallel training on 2 CPU processes (gloo) through `trainer=ddp`: one output folder written
by rank 0 only, and the same optimizer step for the same effective batch whether it is one process's
batch, accumulated micro-batches or the batches of two processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.bertlab_runs import fine_tuning, pretraining, run_child, run_in_process, sentiment_tokenizer


@pytest.mark.slow
def test_mlm_tiny_on_two_processes_writes_one_folder_from_rank_zero(tiny_data_dir, tmp_path):
    run_dir = tmp_path / "run"
    result = run_child(pretraining(tiny_data_dir, tmp_path / "cache", run_dir, "trainer=ddp",
                                       "trainer.max_steps=4", "trainer.val_check_interval=2"), cwd=tmp_path)
    output = result.stdout + result.stderr
    assert "distributed_backend=gloo" in output and "Starting with 2 processes" in output
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in output
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")
                     if path.is_file() and "cache" not in path.parts)
    assert written == sorted(["run/.hydra/config.yaml", "run/.hydra/hydra.yaml", "run/.hydra/overrides.yaml",
                       "run/hf_model/config.json", "run/hf_model/model.safetensors",
                       "run/hf_model/special_tokens_map.json", "run/hf_model/tokenizer.json",
                       "run/hf_model/tokenizer_config.json", "run/hf_model/vocab.txt",
                       "run/lightning_checkpoints/last.ckpt", "run/lightning_checkpoints/step=2.ckpt", "run/lightning_checkpoints/step=4.ckpt",
                       "run/config.yaml", "run/hparams.yaml", "run/metrics.csv", "run/metrics.json",
                       "run/metrics.png", "run/mlm_tiny.log", "run/timing.json"])
    last = torch.load(run_dir / "lightning_checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 4
    assert last["PretrainingDataModule"]["train_sampler"]["num_replicas"] == 2


@pytest.fixture(scope="module")
def first_steps(tiny_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, torch.Tensor]]:
    """The classifier after one SGD step over the same 8 training rows, taken as: one batch of 8;
    two micro-batches of 4 accumulated; one batch of 4 on each of 2 processes; and, as the control,
    a step over 4 rows only."""
    root = tmp_path_factory.mktemp("effective_batch")
    tokenizer = sentiment_tokenizer(tiny_data_dir, root / "tokenizer")
    same_step = ["data.limit_train_samples=8", "trainer.max_steps=1", "trainer.limit_val_batches=0",
                 "optimizer._target_=torch.optim.SGD", "~optimizer.betas", "~optimizer.eps", "optimizer.lr=20",
                 "trainer.gradient_clip_val=null", "model.hidden_dropout_prob=0",
                 "model.attention_probs_dropout_prob=0"]
    layouts = {"one batch of 8": ["data.batch_size=8"],
               "2 accumulated batches of 4": ["data.batch_size=4", "trainer.accumulate_grad_batches=2"],
               "2 processes with 4 each": ["data.batch_size=4", "trainer=ddp"],
               "control: one batch of 4": ["data.batch_size=4"]}
    weights = {}
    for name, layout in layouts.items():
        run_dir = root / name.replace(" ", "_").replace(":", "")
        argv = fine_tuning(tiny_data_dir, tokenizer, run_dir, *same_step, *layout)
        if "trainer=ddp" in layout:
            run_child(argv, cwd=root)
        else:
            outcome = run_in_process(argv)
            assert outcome.code == 0, outcome.err
        weights[name] = load_file(run_dir / "hf_model" / "model.safetensors")
    return weights


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[key] - b[key]).abs().max().item() for key in a)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["2 accumulated batches of 4", "2 processes with 4 each"])
def test_same_effective_batch_gives_the_same_first_step(first_steps, layout):
    assert largest_difference(first_steps[layout], first_steps["one batch of 8"]) < 1e-5  # float rounding: ~1e-7


@pytest.mark.slow
def test_half_the_batch_gives_another_step(first_steps):
    assert largest_difference(first_steps["control: one batch of 4"], first_steps["one batch of 8"]) > 1e-4  # ~7e-4
