"""`python -m bertlab fine-tune +recipe=sst2 [overrides…]`: a sequence classifier from a bertlab or
Hugging Face checkpoint (`model.init_from`), or from scratch as the control experiment.

The best checkpoint (on `task.monitor`) is exported to <run>/hf_model in Hugging Face format.
"""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from bertlab.errors import ConfigError
from bertlab.metrics import best_point, read_metrics, series
from bertlab.model import BertForSequenceClassification
from bertlab.tokenizer import special_token_ids
from bertlab.training.app import launch
from bertlab.training.fit import fit
from bertlab.training.model_group import check_vocabulary, init_from_overrides, model_config
from bertlab.training.run_folder import is_rank_zero


def build_classifier(cfg: DictConfig, tokenizer, label_names: list[str]) -> BertForSequenceClassification:
    labels = {"id2label": dict(enumerate(label_names)),
              "label2id": {name: index for index, name in enumerate(label_names)},
              "num_labels": len(label_names)}
    if cfg.model.init_from:
        # from_pretrained logs which weights are loaded and new, and returns eval mode, which Lightning's fit keeps
        model = BertForSequenceClassification.from_pretrained(
            cfg.model.init_from, **labels, **init_from_overrides(cfg.model)).train()
    else:
        model = BertForSequenceClassification(model_config(
            cfg.model, vocab_size=tokenizer.get_vocab_size(), pad_token_id=special_token_ids(tokenizer)["pad"],
            **labels))
    check_vocabulary(tokenizer, model.config, data_tokenizer(cfg))
    return model


def data_tokenizer(cfg: DictConfig) -> str:
    return str(cfg.data.get("tokenizer"))


def check_tokenizer(cfg: DictConfig) -> None:
    """A classifier from scratch reads its vocabulary from `data.tokenizer` (a checkpoint's folder is
    checked by bertlab.training.requirements before the run starts)."""
    if not cfg.data.get("tokenizer"):
        raise ConfigError("data.tokenizer is not set: name a tokenizer (vocab.txt, tokenizer.json or a "
                          "checkpoint folder), or start from a checkpoint with model.init_from=…")


def fine_tune(cfg: DictConfig) -> float | None:
    """Fits and exports the classifier; returns the best value of `monitor`, the objective a sweeper
    such as Optuna (hydra/sweeper=optuna) optimises (None in the processes other than the first, which
    write no metrics, and in runs that never validate)."""
    check_tokenizer(cfg)

    def prepare():
        datamodule = instantiate(cfg.data, _convert_="all")  # plain lists in hparams: checkpoints load with weights_only
        datamodule.setup("fit")
        model = build_classifier(cfg, datamodule.tokenizer, datamodule.label_names)
        module = instantiate(cfg.task, _partial_=True, _convert_="all")(
            model=model, optimizer=instantiate(cfg.optimizer), scheduler=instantiate(cfg.scheduler))
        return module, datamodule

    run_dir = fit(cfg, prepare, export_weights="best", monitor=cfg.monitor, monitor_mode=cfg.monitor_mode)
    metrics = read_metrics(run_dir)
    if not is_rank_zero() or cfg.monitor not in metrics:  # no validation ran: there is nothing to return
        return None
    return best_point(series(metrics, cfg.monitor), cfg.monitor_mode, cfg.monitor)[1]


def main(argv: list[str], prog: str) -> None:
    launch("fine_tune", fine_tune, argv, prog)
