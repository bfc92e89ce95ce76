"""transformers' config class of a bertlab remote-code export (see bertlab.checkpoint.remote_code). It runs only
inside an export folder, loaded by transformers with trust_remote_code=True; bertlab never imports it."""

from transformers import PretrainedConfig


class BertlabConfig(PretrainedConfig):
    """bertlab's BertConfig fields, kept as config.json has them; the model classes turn them back into
    a BertConfig, which checks them."""

    model_type = "bertlab"
