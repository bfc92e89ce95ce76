"""The data module and LightningModule of a run's config (bertlab.training.run.modules): the task's class is the one
`task._target_` names, and a run imports no other task's module."""

from __future__ import annotations

import subprocess
import sys

from hydra.utils import get_class

OTHER_TASKS = ("bertlab.teacher", "bertlab.data.sentences", "bertlab.lit.classification", "bertlab.lit.fine_tuning",
               "bertlab.lit.embedding_distillation", "bertlab.lit.distillation", "bertlab.lit.task_data")


def test_a_masked_lm_train_imports_no_other_tasks_module():
    script = ("import sys; from hydra.utils import get_class; import bertlab.commands.train; "
              "get_class('bertlab.lit.pretraining.PretrainingModule'); "
              f"print(sorted(name for name in sys.modules if name.startswith({OTHER_TASKS!r})))")
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_only_a_pretrained_students_task_is_built_from_its_checkpoint_before_the_data():
    pretrained_student = {task: getattr(get_class(f"bertlab.lit.{task}"), "pretrained_student", False)
                          for task in ("pretraining.PretrainingModule", "general_distillation.GeneralDistillationModule",
                                       "embedding_distillation.EmbeddingDistillationModule")}
    assert pretrained_student == {"pretraining.PretrainingModule": False,
                                  "general_distillation.GeneralDistillationModule": False,
                                  "embedding_distillation.EmbeddingDistillationModule": True}
