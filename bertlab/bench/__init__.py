"""The pieces of `python -m bertlab bench`: bertlab against Hugging Face transformers, measured in
the same process with the two systems interleaved. One module per measured thing (pretraining, the
ModernBERT shape, fine-tuning, inference), plus the clock, the machine, the sections' runs and the report.
Only the modules that measure transformers import it, and only `bertlab.commands.bench` imports them."""
