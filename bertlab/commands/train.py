"""`python -m bertlab train +recipe=mlm_tiny [overrides…]`: masked-LM (+ NSP) pretraining.

Writes into the run folder: config.yaml (resolved), metrics.csv, metrics.json, metrics.png,
checkpoints/ (Lightning, for resuming) and checkpoint/ (Hugging Face format with the tokenizer);
then points outputs/<name>/latest at the run.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig

from bertlab import hydra_app, run
from bertlab.callbacks import ExportPretrained
from bertlab.checkpoint import load_into
from bertlab.config import BertConfig
from bertlab.tokenizer import special_token_ids

log = logging.getLogger("bertlab")


def train(cfg: DictConfig) -> None:
    started = time.perf_counter()
    run_dir = run.prepare_run_dir(cfg)
    checkpoint = run.resume_path(cfg.resume, run_dir)
    L.seed_everything(cfg.seed, workers=True, verbose=False)

    datamodule = instantiate(cfg.data, _convert_="all")  # plain lists in hparams: checkpoints load with weights_only
    datamodule.setup("fit")
    tokenizer = datamodule.tokenizer
    ids = special_token_ids(tokenizer)
    if cfg.model.init_from:  # continue pretraining: the checkpoint's architecture, its weights below
        config = BertConfig.from_dict({**BertConfig.from_json_file(cfg.model.init_from).to_dict(),
                                       **run.model_overrides(cfg.model)})
    else:
        config = run.model_config(cfg.model, vocab_size=tokenizer.get_vocab_size(), pad_token_id=ids["pad"])
    # _partial_: the config and the optimizer factories are objects, not config values.
    module = instantiate(cfg.task, _partial_=True)(
        config, mask_token_id=ids["mask"], special_token_ids=list(ids.values()), seed=cfg.seed,
        optimizer=instantiate(cfg.optimizer), scheduler=instantiate(cfg.scheduler))
    if cfg.model.init_from:
        run.check_vocabulary(tokenizer, config, str(cfg.tokenizer.path))
        print(load_into(module.model, Path(cfg.model.init_from)))
    elif module.hparams.unigram_output_bias:  # a resumed run then loads its own weights over it
        module.init_output_bias(datamodule.token_counts())
    log.info("%s: %s parameters, vocabulary %d", type(module.model).__name__,
             f"{module.model.num_parameters:,}", config.vocab_size)

    export = ExportPretrained(str(run_dir / "checkpoint"), tokenizer=tokenizer)
    trainer = run.build_trainer(cfg, [export], resume_from=checkpoint)
    trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint)

    if trainer.is_global_zero:
        if HydraConfig.get().mode == RunMode.RUN:
            run.point_latest(run_dir)
        minutes = (time.perf_counter() - started) / 60
        print(run.summary(run_dir, minutes))


def main(argv: list[str], prog: str) -> None:
    hydra_app.run("train", train, argv, prog)
