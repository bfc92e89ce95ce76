"""The optional extras of pyproject.toml that a config can need, named in a one-line error before
anything is written: the package of a logger (`logger=tensorboard`, `mlflow`, `wandb`), and Hydra's
sweeper and launcher plugins (`hydra/sweeper=optuna`, `hydra/launcher=submitit_local|submitit_slurm`),
whose configs exist only once the plugin is installed."""

from __future__ import annotations

import importlib.util

from omegaconf import DictConfig

from bertlab.errors import ConfigError

# A logger's `_target_` → the package it imports, which is also the name of the extra that installs it.
LOGGER_PACKAGES = {
    "lightning.pytorch.loggers.TensorBoardLogger": "tensorboard",
    "lightning.pytorch.loggers.MLFlowLogger": "mlflow",
    "lightning.pytorch.loggers.WandbLogger": "wandb",
}
# A config of a Hydra plugin → (the plugin's package, the extra that installs it).
PLUGIN_EXTRAS = {
    "hydra/sweeper/optuna": ("hydra-optuna-sweeper", "optuna"),
    "hydra/launcher/submitit_local": ("hydra-submitit-launcher", "submitit"),
    "hydra/launcher/submitit_slurm": ("hydra-submitit-launcher", "submitit"),
}


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def install_command(extra: str) -> str:
    return f'pip install -e ".[{extra}]"'


def check_logger_packages(loggers: DictConfig | None) -> None:
    """Every logger of the `logger` group, `loggers`, can be imported."""
    for name, spec in (loggers or {}).items():
        package = LOGGER_PACKAGES.get(spec.get("_target_")) if spec is not None else None
        if package is not None and not installed(package):
            raise ConfigError(f"logger={name} needs the {package} package: {install_command(package)}")


def missing_plugin_message(config_path: str) -> str | None:
    """What to install for a config of a Hydra plugin that is not installed (`hydra/sweeper/optuna`);
    None for any other config."""
    if config_path not in PLUGIN_EXTRAS:
        return None
    plugin, extra = PLUGIN_EXTRAS[config_path]
    group, _, option = config_path.rpartition("/")
    return f"{group}={option} needs Hydra's {plugin} plugin: {install_command(extra)}"
