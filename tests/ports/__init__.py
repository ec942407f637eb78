"""Ports written as users write them, each a torch model and its Paddle port, both of the project's own: the corpus
tests/test_ports.py runs with no name map, each correct port green and each plant red at its module, so that a change
to the pairing or the layouts cannot land while it turns a right verdict wrong.

vit: a timm-style ViT against a PaddleClas-style port (the class token and position table held by the model) and
against PaConvert's output; a transformers-style ViT and CLIP vision tower whose embeddings container holds the
tables the port's model holds itself. paconvert: models as PaConvert 3.3.1 writes them (paddle.compat.nn.Linear,
torch's [out, in] layout, beside paddle.nn's Conv2D and LayerNorm), one beside a classic paddle.nn.Linear, one of
square Linears only. rnn: an LSTM classifier torch runs on a PackedSequence and its port on sequence_length=."""
