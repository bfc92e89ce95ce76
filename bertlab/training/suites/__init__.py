"""Sweeps, the GLUE suite and the reports that read their runs: summaries, comparisons, verdicts."""
