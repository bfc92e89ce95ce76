"""`python -m bertlab prepare-data +recipe=mlm_tiny [overrides…]`: a `train` config's pretraining data
(documents, WordPiece vocabulary, token ids, packed sequences) built into `data.cache_dir`, and nothing
else. Run it once, on one machine, before a multi-process or multi-node `train` with the same overrides:
every training process then loads the cached files instead of building them at the same time.
"""

from __future__ import annotations

import logging

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig

from bertlab.data.pretraining import PretrainingDataModule
from bertlab.errors import ConfigError
from bertlab.training.launch.app import launch

log = logging.getLogger("bertlab")

# No run folder: the files go to data.cache_dir, the log to the terminal.
NO_RUN_FOLDER = ["hydra.output_subdir=null", "hydra/job_logging=stdout", "hydra.run.dir=."]


def prepare_data(cfg: DictConfig) -> None:
    if not issubclass(get_class(cfg.data._target_), PretrainingDataModule):
        raise ConfigError(f"bertlab prepare-data builds a masked-LM recipe's corpus ({PretrainingDataModule.__name__}); "
                         f"this config's data is {cfg.data._target_.rpartition('.')[2]}, which has nothing to "
                         f"prepare: run bertlab train with it directly")
    datamodule = instantiate(cfg.data, _convert_="all")
    datamodule.setup("fit")
    log.info("pretraining data ready in %s: %s", datamodule.cache_dir,
             ", ".join(f"{split} {len(rows):,} sequences" for split, rows in datamodule.datasets.items()))


def main(argv: list[str], prog: str) -> None:
    launch("train", prepare_data, [*argv, *NO_RUN_FOLDER], prog)
