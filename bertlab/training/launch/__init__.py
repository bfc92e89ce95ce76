"""Composing, checking and launching a command through Hydra: the config tree, recipes and resolvers."""
