"""Step 2's planted bugs: the data-pipeline and metric mistakes a port typically makes.

Each patches twins/pt_data.py or twins/pd_data.py (or the library under it) in
memory, so the script run afterwards is the real one with one thing changed.
"""
from plant import plant


def _force(module, name, **kwargs):
    """Make module.name (a class or function) always be called with kwargs overriding the caller's."""
    original = getattr(module, name)
    setattr(module, name, lambda *a, **kw: original(*a, **{**kw, **kwargs}))


@plant("paddle_cased_tokenizer")
def _():
    """The Paddle tokenizer built with do_lower_case=False on the uncased vocab."""
    from bert_sst2.twins import pd_data
    _force(pd_data, "BertTokenizer", do_lower_case=False)


@plant("paddle_max_length_256")
def _():
    """The Paddle side truncating at 256 (another script's default) instead of MAX_SEQ_LENGTH 128."""
    from bert_sst2.twins import pd_data
    _force(pd_data, "encode", max_length=256)


@plant("paddle_drop_last")
def _():
    """The Paddle BatchSampler built with drop_last=True: the last, short batch disappears."""
    from bert_sst2.twins import pd_data
    _force(pd_data, "BatchSampler", drop_last=True)


@plant("torch_shuffle")
def _():
    """The torch DataLoader built with shuffle=True on top of the shared order."""
    from bert_sst2.twins import pt_data
    _force(pt_data, "DataLoader", shuffle=True)


@plant("paddle_no_attention_mask")
def _():
    """paddlenlp's tokenizer called without return_attention_mask=True, its default: no mask at all."""
    from paddlenlp.transformers import BertTokenizer
    call = BertTokenizer.__call__

    def without_mask(self, *args, **kwargs):
        kwargs.pop("return_attention_mask", None)
        return call(self, *args, **kwargs)
    BertTokenizer.__call__ = without_mask


@plant("torch_argmax_wrong_axis")
def _():
    """argmax without dim=-1: over the flattened [N, 2] logits, one index broadcast against every label.

    (argmax(dim=0) gives shape [2] and crashes on `== labels` by itself; this is the silent one.)
    """
    from bert_sst2.twins import pt_data

    def update(self, logits, labels):
        self.correct += int((logits.argmax() == labels).sum())
        self.count += len(labels)
    pt_data.Accuracy.update = update
