"""`python -m bertlab glue CHECKPOINT [tasks=cola,sst2,…] [seeds=0,1,2] [lrs=…] [scratch=true] [select_on=dev]
[overrides…]`:
the GLUE suite for a pretrained model — a fine-tune per task and seed, then the GLUE table.

CHECKPOINT is a bertlab run folder (its hf_model/ is used), a Hugging Face BERT folder, or the
`latest` link of a recipe. `tasks` defaults to GLUE-small (cola, sst2, mrpc, stsb, rte); all nine
are cola, sst2, mrpc, stsb, qqp, mnli, mnli_mm, qnli, rte, wnli (those without a copy in
$BERTLAB_DATA_DIR/glue come from the hub, nyu-mll/glue). `scratch=true` trains the same architecture
from random weights with the checkpoint's vocabulary: the control. Other arguments are `fine-tune`
overrides for every job (e.g. optimizer.lr=1e-3). `lrs` is a grid of fine-tuning learning rates
instead of one: every task runs every seed at each, and the table reports each task at the rate
with the best mean selection score.
`task:rate` items give a task its own rates, e.g. lrs=sst2:2e-4,rte:3e-4,1e-3 (SST-2 at 2e-4, RTE at
3e-4, the other tasks at 1e-3: one rate each, nothing chosen); lrs=sst2:2e-4,sst2:5e-4,1e-3 gives SST-2 a
grid of two, chosen between.
Selection does not peek: each job holds 5% of its task's training rows out (at most 1,000; seeded and
stratified, the same rows for every seed: bertlab.data.selection), chooses its checkpoint, and the suite
its rates, on them, and reports the GLUE validation split once, at the chosen checkpoint; every validation
also scores the validation split, so the tables give the dev-selected figures of the same jobs beside the
reported ones. `select_on=dev` trains on every training row and chooses on the validation split itself, as
BERT's and Google's small BERTs' GLUE figures were (for comparison with papers); its folder ends in _dev.
The suite folder (hydra.sweep.dir, default outputs/glue/<recipe>/<run>[_scratch][_dev]) gets
<task>/seed_<n>/ per job (<task>/lr_<rate>/seed_<n>/ with `lrs`) and glue.csv, glue.md, glue_seeds.csv
(each task's score per seed, what `bertlab compare` judges) and glue.png; run again, the command skips the jobs that finished (and refuses other settings than theirs).
"""

from __future__ import annotations

import itertools
from pathlib import Path

from bertlab.checkpoint.dispatch import read_config
from bertlab.commands.arguments import checkpoint_folder
from bertlab.errors import CheckpointError, UsageError
from bertlab.training.launch.app import launch
from bertlab.training.run.model_group import ARCHITECTURE_KEYS
from bertlab.training.run.run_folder import HF_MODEL
from bertlab.training.suites.glue import GLUE_SMALL, GLUE_TASKS, check_finished_jobs
from bertlab.training.suites.hydra_callbacks import glue_job

OPTIONS = {"tasks": ",".join(GLUE_SMALL), "seeds": "0,1,2", "lrs": "", "scratch": "false", "select_on": "train"}
# The selection split's share of a task's training rows (capped by data.selection_max_rows): large enough to
# choose among checkpoints on (124 RTE rows, 183 MRPC, 428 CoLA), small enough to leave 95% of a small task's
# training set (docs/statistics.md).
SELECTION_FRACTION = 0.05


def hugging_face_folder(checkpoint: str) -> Path:
    folder = Path(checkpoint_folder(checkpoint))
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{checkpoint}: not a checkpoint; expected a bertlab run folder (with {HF_MODEL}/) or "
                              f"a Hugging Face BERT folder (with config.json)")
    return folder.resolve()


def parse(argv: list[str]) -> tuple[Path, dict[str, str], list[str]]:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0)
    if argv[0].startswith("-") or "=" in argv[0]:
        raise UsageError("bertlab glue: the checkpoint comes first (see bertlab glue --help)")
    options, overrides = dict(OPTIONS), []
    for token in argv[1:]:
        key, equals, value = token.partition("=")
        if equals and key in options:
            options[key] = value.strip("[]")
        else:
            overrides.append(token)
    unknown = [task for task in options["tasks"].split(",") if task not in GLUE_TASKS]
    if unknown:
        raise UsageError(f"bertlab glue: tasks={options['tasks']}: unknown {', '.join(unknown)}; "
                         f"expected some of {', '.join(GLUE_TASKS)}")
    if not all(seed.isdigit() for seed in options["seeds"].split(",")):
        raise UsageError(f"bertlab glue: seeds={options['seeds']}: expected non-negative integers, e.g. seeds=0,1,2")
    if options["lrs"]:
        task_rates(options["lrs"], options["tasks"].split(","))  # refuses a bad grid before anything runs
        if any(token.lstrip("+").startswith("optimizer.lr=") for token in overrides):
            raise UsageError("bertlab glue: give the learning rate as lrs=… (a grid) or optimizer.lr=… (one), "
                             "not both")
    if options["scratch"] not in ("true", "false"):
        raise UsageError(f"bertlab glue: scratch={options['scratch']}: expected true or false")
    if options["select_on"] not in ("train", "dev"):
        raise UsageError(f"bertlab glue: select_on={options['select_on']}: expected train (a split held out of the "
                         f"training rows) or dev (the validation split, as papers select)")
    return hugging_face_folder(argv[0]), options, overrides


def task_rates(lrs: str, tasks: list[str]) -> dict[str, list[str]]:
    """Each task's grid of rates from `lrs`: plain items for every task, `task:rate` items for that task alone."""
    shared, own = [], {task: [] for task in tasks}
    for item in lrs.split(","):
        task, _, rate = item.rpartition(":")
        if not is_positive_number(rate):
            raise UsageError(f"bertlab glue: lrs={lrs}: expected positive numbers, e.g. lrs=3e-4,1e-3, or task:rate "
                             f"items, e.g. lrs=sst2:2e-4,1e-3")
        if task and task not in own:
            raise UsageError(f"bertlab glue: lrs={lrs}: {item} names a task that is not in tasks={','.join(tasks)}")
        (own[task] if task else shared).append(rate)
    missing = [task for task, rates in own.items() if not rates and not shared]
    if missing:
        raise UsageError(f"bertlab glue: lrs={lrs}: no rate for {', '.join(missing)}; add a rate for every other "
                         f"task, e.g. lrs={lrs},1e-3")
    return {task: rates or shared for task, rates in own.items()}


def is_positive_number(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def suite_launches(checkpoint: Path, options: dict[str, str]) -> list[list[str]]:
    """The `fine-tune -m` command lines of the suite (before the user's own overrides): one per group of
    tasks that share their grid of rates, all into one suite folder."""
    folder = checkpoint.parent if checkpoint.name == HF_MODEL else checkpoint  # the run, or the HF folder
    name = f"{folder.parent.name}/{folder.name}"  # e.g. mlm_tiny/2026-11-25_03-07-47
    if options["scratch"] == "true":
        config = read_config(checkpoint)
        model = ["model.init_from=null", f"data.tokenizer={checkpoint}",
                 *(f"model.{key}={'null' if getattr(config, key) is None else getattr(config, key)}"
                   for key in ARCHITECTURE_KEYS)]
        name += "_scratch"
    else:
        model = [f"model.init_from={checkpoint}"]
    if options["select_on"] == "dev":
        name += "_dev"
        selection = []
    else:
        selection = [f"data.selection_fraction={SELECTION_FRACTION}"]
    tasks, seeds = options["tasks"].split(","), options["seeds"].split(",")
    rates = task_rates(options["lrs"], tasks) if options["lrs"] else dict.fromkeys(tasks, [])
    groups: dict[tuple[str, ...], list[str]] = {}
    for task in tasks:
        groups.setdefault(tuple(rates[task]), []).append(task)
    subdir = "${glue.task}/lr_${optimizer.lr}/seed_${seed}" if options["lrs"] else "${glue.task}/seed_${seed}"
    group_jobs = [len(group) * len(seeds) * max(1, len(lrs)) for lrs, group in groups.items()]
    launches = []
    for (lrs, group), done_before in zip(groups.items(), [0, *itertools.accumulate(group_jobs)]):
        grid = [f"optimizer.lr={','.join(lrs)}"] if lrs else []
        launches.append(["-m", f"+glue={','.join(group)}", f"seed={','.join(seeds)}", *grid, *model, *selection,
                         "name=glue",
                         "trainer.precision=fastest", f"hydra.sweep.dir=${{paths.output_dir}}/glue/{name}",
                         f"hydra.sweep.subdir={subdir}",
                         "+hydra.callbacks.glue_suite._target_=bertlab.training.suites.hydra_callbacks.GlueSuite",
                         f"+hydra.callbacks.glue_suite.jobs={sum(group_jobs)}",
                         f"+hydra.callbacks.glue_suite.done_before={done_before}"])
    return launches


def main(argv: list[str], prog: str) -> None:
    checkpoint, options, overrides = parse(argv)
    for suite_overrides in suite_launches(checkpoint, options):
        launch("fine_tune", glue_job, [*suite_overrides, *overrides], prog, also_check=check_finished_jobs)
