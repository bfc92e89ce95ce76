"""A tiny BERT, in-memory batches and a quiet Trainer for the Lightning-module tests."""

from __future__ import annotations

import functools

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader

from bertlab.lit.optim import warmup_schedule
from bertlab.lit.pretraining import PretrainingModule
from tests import factories

VOCAB, MASK_ID = 100, 4


small_config = functools.partial(factories.small_config, vocab_size=VOCAB, num_attention_heads=2,
                                 max_position_embeddings=32)


def adamw(lr: float = 3e-3, weight_decay: float = 0.01):
    return functools.partial(torch.optim.AdamW, lr=lr, weight_decay=weight_decay)


def pretraining_batch(nsp: bool = False) -> dict[str, torch.Tensor]:
    """Row r repeats token 10 + r: a masked token can be recalled from its unmasked neighbours."""
    ids = (10 + torch.arange(8))[:, None].repeat(1, 16)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
             "special_tokens_mask": special}
    if nsp:
        batch["next_sentence_label"] = torch.arange(8) % 2
    return batch


def classification_batch(num_labels: int = 2) -> dict[str, torch.Tensor]:
    """Label = whether token 5 occurs: learnable from the input alone."""
    ids = torch.randint(6, VOCAB, (16, 12), generator=torch.Generator().manual_seed(1))
    ids[::2, 3] = 5
    has_five = (ids == 5).any(dim=1)
    labels = has_five.float() * 2 - 1 if num_labels == 1 else has_five.long()
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
            "labels": labels, "index": torch.arange(16)}


def loader(batches: list[dict]) -> DataLoader:
    return DataLoader(batches, batch_size=None)



def trainer(tmp_path, max_steps: int, **kwargs) -> L.Trainer:
    options = dict(max_steps=max_steps, accelerator="cpu", devices=1, logger=CSVLogger(tmp_path / "logs"),
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   num_sanity_val_steps=0)
    return L.Trainer(**{**options, **kwargs})


def pretraining_module(**kwargs) -> PretrainingModule:
    options = dict(config=small_config(), mask_token_id=MASK_ID, optimizer=adamw(lr=1e-2),
                   scheduler=functools.partial(warmup_schedule, warmup_steps=3), mlm_probability=0.3, seed=7)
    return PretrainingModule(**{**options, **kwargs})


def fit_straight_and_resumed(make_module, data, tmp_path, max_steps: int = 4, **options):
    """Two modules from `make_module()` (each after torch.manual_seed(0)) trained on `data` for `max_steps`: one
    straight through, one stopped halfway, checkpointed and resumed in a new module and Trainer."""
    torch.manual_seed(0)
    straight = make_module()
    trainer(tmp_path, max_steps=max_steps, **options).fit(straight, data)
    torch.manual_seed(0)
    interrupted = trainer(tmp_path, max_steps=max_steps // 2, **options)
    interrupted.fit(make_module(), data)
    interrupted.save_checkpoint(tmp_path / "half.ckpt")
    resumed = make_module()
    trainer(tmp_path, max_steps=max_steps, **options).fit(resumed, data, ckpt_path=tmp_path / "half.ckpt")
    return straight, resumed


def model_weights(module):
    return {key: value.clone() for key, value in module.model.state_dict().items()}


def save_tiny_bert(directory, texts: list[str], model_class=None, **overrides):
    """A tiny model of `model_class` (default BertModel) with a WordPiece tokenizer of `texts`, exported to
    `directory` as a Hugging Face–format folder; returns the folder."""
    from bertlab.checkpoint.dispatch import export_pretrained
    from bertlab.model import BertModel
    from bertlab.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab_size=80)
    model = (model_class or BertModel)(small_config(vocab_size=tokenizer.get_vocab_size(), **overrides))
    export_pretrained(model, tokenizer, directory)
    return directory
