"""Lightning modules for pretraining and fine-tuning, and their optimisation setup."""

from bertlab.lit.classification import ClassificationModule
from bertlab.lit.pretraining import PretrainingModule

__all__ = ["ClassificationModule", "PretrainingModule"]
