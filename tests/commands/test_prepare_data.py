"""`prepare-data` builds a train config's data into data.cache_dir, which `train` then only loads."""

from pathlib import Path

import pytest

from tests.bertlab_runs import pretraining, run_in_process


def cache_files(cache_dir: Path) -> dict[str, int]:
    return {str(path.relative_to(cache_dir)): path.stat().st_mtime_ns for path in cache_dir.rglob("*")}


@pytest.mark.slow
def test_train_loads_what_prepare_data_built_and_builds_nothing(tiny_data_dir, tmp_path, capsys):
    cache_dir, run_dir = tmp_path / "cache", tmp_path / "run"
    train = pretraining(tiny_data_dir, cache_dir, run_dir, "trainer.max_steps=2", "data.num_proc=2")
    prepared = run_in_process(["prepare-data", *train[1:]], capsys)
    assert prepared.code == 0, prepared.err
    assert "pretraining data ready in" in prepared.out + prepared.err
    assert not run_dir.exists()  # no run folder: only the cache
    built = cache_files(cache_dir)
    assert any(name.startswith("sequences-") for name in built) and any(name.startswith("tokenizer-") for name in built)

    trained = run_in_process(train, capsys)
    assert trained.code == 0, trained.err
    assert (run_dir / "hf_model" / "model.safetensors").is_file()
    assert cache_files(cache_dir) == built  # every file loaded, none written again
