"""Data: where datasets come from, how text becomes batches, and how batches are masked."""
