"""transformers' classes of a bertlab remote-code export (bertlab.checkpoint.remote_code), which config.json's auto_map
names: the config class, which keeps bertlab's BertConfig fields as config.json has them, and the model classes, each
of which builds bertlab's own model and adopts its submodules (so the state-dict names are bertlab's) and returns
transformers' output classes. Only transformers imports it, from an export folder (trust_remote_code=True)."""

import torch.nn.functional as F
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import (BaseModelOutputWithPooling, MaskedLMOutput, QuestionAnsweringModelOutput,
                                         SequenceClassifierOutput, TokenClassifierOutput)
from transformers.models.bert.modeling_bert import BertForPreTrainingOutput

from .bertlab_config import BertConfig
from .bertlab_model import (BertForMaskedLM, BertForPreTraining, BertForQuestionAnswering,
                            BertForSequenceClassification, BertForTokenClassification, BertModel)


class BertlabConfig(PretrainedConfig):
    """bertlab's BertConfig fields as config.json has them; the model classes turn them into a (checked) BertConfig."""

    model_type = "bertlab"


class BertlabPreTrainedModel(PreTrainedModel):
    config_class = BertlabConfig
    base_model_prefix = "bert"

    def __init__(self, config: BertlabConfig):
        super().__init__(config)
        model = self.bertlab_class(BertConfig.from_dict(config.to_dict()))
        for name, child in model.named_children():
            self.add_module(name, child)
        self._bertlab = (model,)  # a tuple: its children are this module's, registered once
        self.post_init()

    @property
    def bertlab(self):
        return self._bertlab[0]

    def _init_weights(self, module):
        self.bertlab._init_weights(module)

    def train(self, mode: bool = True):
        self.bertlab.training = mode
        return super().train(mode)

    def get_input_embeddings(self):
        return getattr(self.bertlab, "bert", self.bertlab).embeddings.word_embeddings

    def _run(self, input_ids, attention_mask, token_type_ids, position_ids, head_mask, output_attentions,
             output_hidden_states, inputs_embeds, **kwargs):
        """bertlab's forward; an output switch left at None reads this model's transformers config, as
        transformers' models do (bertlab's copy of the config was taken when the model was built)."""
        attentions = self.config.output_attentions if output_attentions is None else output_attentions
        hidden_states = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        return self.bertlab(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                            output_attentions=bool(attentions), output_hidden_states=bool(hidden_states),
                            inputs_embeds=inputs_embeds, **kwargs)


def _masked_lm_loss(logits, labels):
    """The mean cross-entropy over the labelled positions, as bertlab's sparse head computes it."""
    return None if labels is None else F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


# Each forward returns bertlab's output fields that are not None as transformers' output class: they are named alike.
class BertlabModel(BertlabPreTrainedModel):
    bertlab_class = BertModel

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                output_attentions=None, output_hidden_states=None, inputs_embeds=None, return_dict=None, **_):
        out = self._run(input_ids, attention_mask, token_type_ids, position_ids, head_mask, output_attentions,
                        output_hidden_states, inputs_embeds)
        return BaseModelOutputWithPooling(**dict(out.items()))


class BertlabForMaskedLM(BertlabPreTrainedModel):
    bertlab_class = BertForMaskedLM

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                labels=None, output_attentions=None, output_hidden_states=None, inputs_embeds=None, return_dict=None,
                **_):
        out = self._run(input_ids, attention_mask, token_type_ids, position_ids, head_mask, output_attentions,
                        output_hidden_states, inputs_embeds)
        return MaskedLMOutput(loss=_masked_lm_loss(out.logits, labels), **dict(out.items()))


class BertlabForPreTraining(BertlabPreTrainedModel):
    bertlab_class = BertForPreTraining

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                labels=None, next_sentence_label=None, output_attentions=None, output_hidden_states=None,
                inputs_embeds=None, return_dict=None, **_):
        out = self._run(input_ids, attention_mask, token_type_ids, position_ids, head_mask, output_attentions,
                        output_hidden_states, inputs_embeds)
        losses = [_masked_lm_loss(out.prediction_logits, labels)] if labels is not None else []
        if next_sentence_label is not None:
            losses.append(F.cross_entropy(out.seq_relationship_logits.float(), next_sentence_label.flatten()))
        return BertForPreTrainingOutput(loss=sum(losses) if losses else None, **dict(out.items()))


class BertlabForSequenceClassification(BertlabPreTrainedModel):
    bertlab_class, output_class = BertForSequenceClassification, SequenceClassifierOutput

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                labels=None, output_attentions=None, output_hidden_states=None, inputs_embeds=None, return_dict=None,
                **_):
        out = self._run(input_ids, attention_mask, token_type_ids, position_ids, head_mask, output_attentions,
                        output_hidden_states, inputs_embeds, labels=labels)
        return self.output_class(**dict(out.items()))


class BertlabForTokenClassification(BertlabPreTrainedModel):
    bertlab_class, output_class = BertForTokenClassification, TokenClassifierOutput
    forward = BertlabForSequenceClassification.forward


class BertlabForQuestionAnswering(BertlabPreTrainedModel):
    bertlab_class = BertForQuestionAnswering

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                start_positions=None, end_positions=None, output_attentions=None, output_hidden_states=None,
                inputs_embeds=None, return_dict=None, **_):
        out = self._run(input_ids, attention_mask, token_type_ids, position_ids, head_mask, output_attentions,
                        output_hidden_states, inputs_embeds, start_positions=start_positions,
                        end_positions=end_positions)
        return QuestionAnsweringModelOutput(**dict(out.items()))
