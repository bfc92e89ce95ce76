"""`python -m bertlab fine-tune +recipe=sst2 [overrides…]`: a sequence classifier from a bertlab or
Hugging Face checkpoint (`model.init_from`), or from scratch as the control experiment.

The best checkpoint (on `monitor`) is exported to <run>/hf_model in Hugging Face format; its value is what
a sweeper such as Optuna (hydra/sweeper=optuna) optimises. The route: bertlab.training.run.fit.run_training.
"""

from __future__ import annotations

from bertlab.training.launch.app import launch
from bertlab.training.run.fit import prepare_training, run_training


def main(argv: list[str], prog: str) -> None:
    launch("fine_tune", run_training, argv, prog, prepare=prepare_training)
