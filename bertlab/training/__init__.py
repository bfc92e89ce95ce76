"""The training path, a package per job: `launch` composes a command's config and hands it to Hydra, `checks` refuses
what cannot run before anything is made, `run` trains one run, `suites` sweeps runs and reports on them."""
