"""Looking inside a BERT: attention maps of a sentence, and the importance of attention heads."""
