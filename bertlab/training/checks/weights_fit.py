"""Whether a checkpoint's weights fit the model that reads them: the one rule every command and run
applies before it uses a checkpoint (`model.init_from`, a distillation teacher, the checkpoint of
predict, evaluate, heads, attention, shrink, glue).

A head the checkpoint lacks (a classifier on a masked-LM export, a pooler, a masked-LM head) is
expected: it is initialised and the load report says so. An encoder tensor (the embeddings or a
layer) that is missing, renamed, extra or of another shape is refused in one line naming the
tensors: a body trained from random weights is a ruined experiment. `model.allow_reinitialised=true`
(a run) or `--allow-reinitialised` (a command) asks for it explicitly; it is then logged.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from bertlab.checkpoint.dispatch import WEIGHTS_NAME
from bertlab.checkpoint.fitting import LoadReport, layer_pattern
from bertlab.errors import CheckpointError
from bertlab.model import BertModel

log = logging.getLogger("bertlab")
ENCODER_PREFIXES = ("embeddings.", "encoder.")  # below the optional `bert.`; everything else is a head
ALLOW_KEY = "model.allow_reinitialised=true"
ALLOW_FLAG = "--allow-reinitialised"


def is_encoder_tensor(key: str) -> bool:
    return key.removeprefix("bert.").startswith(ENCODER_PREFIXES)


def unfit_encoder_tensors(report: LoadReport) -> list[str]:
    """What does not fit among the encoder tensors, grouped: `missing …`, `unexpected …`, `shape of …`."""
    missing = [key for key in report.missing if is_encoder_tensor(key)]
    unexpected = [key for key in report.unexpected if is_encoder_tensor(key)]
    mismatched = [f"{key} (checkpoint {tuple(found)}, model {tuple(wanted)})"
                  for key, found, wanted in report.mismatched if is_encoder_tensor(key)]
    groups = [("missing", layer_pattern(missing)), ("unexpected", layer_pattern(unexpected)),
              ("shape of", mismatched)]
    return [f"{name} {', '.join(keys)}" for name, keys in groups if keys]


def check_weights_fit(report: LoadReport, what: str, allow: bool, how_to_allow: str = ALLOW_KEY) -> None:
    """Refuses `report`'s checkpoint when an encoder tensor does not fit, unless `allow`.
    `what` names the checkpoint as the user gave it (`model.init_from=…`, a command's argument)."""
    unfit = unfit_encoder_tensors(report)
    if not unfit:
        return
    described = "; ".join(unfit)
    if allow:
        log.warning("%s: encoder tensors re-initialised (allowed): %s", what, described)
        return
    raise CheckpointError(f"{what}: its encoder does not fit {report.model_class} ({described}); those tensors "
                          f"would start from random weights. Use a checkpoint of this architecture, or "
                          f"{how_to_allow} to train them from scratch")


def quietly_loaded(model_class: type, folder: str | Path, **config_overrides):
    """`model_class.from_pretrained` without its load report in the log (the caller judges it)."""
    logger = logging.getLogger("bertlab")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return model_class.from_pretrained(folder, **config_overrides)
    finally:
        logger.setLevel(level)


def check_encoder_weights_fit(folder: str | Path, what: str, allow: bool) -> None:
    """The check of `check_weights_fit` on the encoder of the checkpoint `folder`, before a run uses it
    (bertlab.training.checks.environment); a folder without weights is left to the step that reads it."""
    weights = Path(folder) / WEIGHTS_NAME
    if weights.is_file():
        check_weights_fit(encoder_report(str(weights.parent.resolve()), weights.stat().st_mtime_ns), what, allow)


@functools.lru_cache(maxsize=8)
def encoder_report(folder: str, modified_ns: int) -> LoadReport:
    """The load report of `folder` read into a BertModel; kept per file version (a sweep checks it per job)."""
    return quietly_loaded(BertModel, folder).load_report
