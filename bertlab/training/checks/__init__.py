"""The checks of a composed config before a run starts, one job a module: `before_run.check` runs them in
order (bertlab.training.launch.app.launch calls it), the rules between keys beside it; `keys`, one walk over
the keys: every key is one bertlab reads and every value fits what its taker declares (bertlab.value_rules),
with `LIBRARY_ARGUMENTS` for the classes of other libraries; `environment`, what the machine, the installed
extras and plugins, the checkpoints and the run folder must offer (a checkpoint to resume too). The checks of
the model group live with it (bertlab.training.run.model_group)."""
