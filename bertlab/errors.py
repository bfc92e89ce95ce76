"""Errors a user can act on. The CLI prints them as one line and exits non-zero."""


class BertlabError(Exception):
    """Base class: the message says what is wrong, where, and what was expected."""


class UsageError(BertlabError):
    """The command line itself is malformed (an unknown flag, a missing argument): exit status 2."""


class ConfigError(BertlabError, ValueError):
    """A configuration value is invalid."""


class CheckpointError(BertlabError):
    """A checkpoint directory or file cannot be read or does not fit the model."""


class DataError(BertlabError):
    """A dataset, file or column is missing, empty or malformed."""
