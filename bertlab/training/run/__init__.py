"""One run of `train` or `fine-tune`, from its prepared data and module to its exported weights."""
