"""The teacher of a distillation (bertlab.lit.distillation, bertlab.lit.embedding_distillation): its folder
checked against the student's task (`folders`), one pass over the texts in eval mode (`inference`), and its
outputs cached (`cache`) so that a rerun or a resumed run loads them instead of running the teacher again:
a classifier's logits and [CLS] states (`outputs`), a sentence encoder's embeddings (`embeddings`).

That teacher reads the texts with its own tokenizer, so it need not share the student's vocabulary: what
it hands over is per sentence, never per token. General distillation's (bertlab.lit.general_distillation)
hands over states per token instead, so it runs on the student's own batches at every step, up to one
layer's attention (`layer_states`), and the student reads its tokens.
"""
