"""The package list, the one build setting pyproject.toml cannot express: every package found under bertlab/,
plus the config packages that [tool.setuptools.package-dir] maps to conf/ and recipes/."""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["bertlab", "bertlab.*"]) + ["bertlab.conf", "bertlab.recipes"])
