"""Checkpoint formats, one module each — bert (transformers' BERT), modernbert (transformers' ModernBERT),
remote_code (any other mix, with its modelling code) — and dispatch, the one place that picks among them and
imports a format's module when it tries it.
bertlab.model reaches this package only when a model is saved or loaded."""
