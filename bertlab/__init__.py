"""bertlab: pretrain and fine-tune BERT models built from scratch, driven by Hydra configs."""

from bertlab.allocator import keep_freed_memory
from bertlab.config import BertConfig
from bertlab.model import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from bertlab.tokenizer import BertTokenizer

__all__ = ["BertConfig", "BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification",
           "BertForTokenClassification", "BertForQuestionAnswering",
           "BertTokenizer", "keep_freed_memory"]
__version__ = "0.1.0"
