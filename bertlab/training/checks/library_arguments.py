"""The ranges and choices of the arguments of other libraries' classes that config groups build —
Lightning's Trainer and callbacks, torch's AdamW — which bertlab cannot declare in their annotations
(bertlab.value_rules); their types are those annotations. The keys: `trainer.*` (conf/trainer), `optimizer.*`
(conf/optimizer), `callbacks.checkpoint.save_top_k` and `callbacks.progress_bar.refresh_rate` (conf/callbacks)."""

from __future__ import annotations

import torch
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar

from bertlab.run_rules import COUNT, NON_NEGATIVE, POSITIVE
from bertlab.training.run import precision
from bertlab.value_rules import Interval, OneOf

DEVICES = Interval("[1, 65536]")
UNLIMITED = Interval("[-1, inf)")  # -1: no limit
LIBRARY_ARGUMENTS = {
    Trainer: {
        "accelerator": OneOf("cpu", "gpu", "cuda", "mps", "tpu", "auto"),
        "precision": OneOf("32-true", "32", 32, "64-true", "64", 64, "bf16-mixed", "bf16", "bf16-true", "16-mixed",
                           "16", 16, "16-true", "transformer-engine", precision.FASTEST),
        "devices": Interval(DEVICES.bounds, takes_text=True),  # also auto, or "0,1"
        "num_nodes": DEVICES,
        "max_steps": UNLIMITED,
        "max_epochs": UNLIMITED,
        "val_check_interval": Interval(POSITIVE.bounds, takes_text=True),  # also a duration, "00:00:30:00"
        "check_val_every_n_epoch": COUNT,
        "limit_val_batches": NON_NEGATIVE,
        "num_sanity_val_steps": UNLIMITED,
        "gradient_clip_val": NON_NEGATIVE,
        "accumulate_grad_batches": COUNT,
        "log_every_n_steps": COUNT,
    },
    torch.optim.AdamW: {"lr": POSITIVE, "eps": Interval("(0, 1)"), "weight_decay": NON_NEGATIVE},
    ModelCheckpoint: {"save_top_k": UNLIMITED},  # -1 keeps all
    TQDMProgressBar: {"refresh_rate": NON_NEGATIVE},
}
