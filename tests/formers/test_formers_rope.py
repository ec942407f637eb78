"""Gemma 3's two rotary embeddings paired by the layer type that uses each (PaddleFormers environment only;
portcheck.forward.alike). transformers' Gemma3TextModel calls its one rotary_emb per layer type, in its config's
order (here the sliding-window layers' local base first, then the full layers' global base); a port holding one
module per base, rotary_emb (global) and rotary_emb_local, computes them in its own order. The pairing takes the
order whose run gives torch's output: the correct port green at both rotary calls, its two bases swapped red there."""
import copy

import numpy as np
import paddle
import pytest
import torch
import transformers

TINY = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, layer_types=["sliding_attention", "full_attention"], sliding_window=4)


def two_ropes(config, swapped=False):
    """paddleformers' Gemma3TextModel with the sliding-window layers' own RoPE base, as transformers computes it:
    rotary_emb (rope_theta) for the full-attention layers, rotary_emb_local (rope_local_base_freq) for the sliding
    ones. swapped: the two modules' bases exchanged, the layers reading each as before."""
    from paddleformers.transformers.gemma3_text import modeling

    class TwoRopes(modeling.Gemma3TextModel):
        def __init__(self, config):
            super().__init__(config)
            local = copy.deepcopy(config)
            local.rope_parameters = dict(config.rope_parameters, rope_theta=config.rope_local_base_freq)
            self.rotary_emb_local = modeling.Gemma3RotaryEmbedding(local)

        def forward(self, input_ids):
            x = self.embed_tokens(input_ids)
            batch, length = input_ids.shape
            positions = paddle.arange(length, dtype="int64").expand((batch, length))
            masks = dict(config=self.config, inputs_embeds=x, batch_size=batch, seq_length=length, cache_length=0,
                         attention_mask=None, attn_mask_startend_row_indices=None,
                         prepare_decoder_attention_mask=self._prepare_decoder_attention_mask)
            masks = {"full_attention": modeling.create_causal_mask_and_row_indices(**masks)[0],
                     "sliding_attention": modeling.create_sliding_window_causal_mask_and_row_indices(**masks)[0]}
            rope = {"full_attention": self.rotary_emb(x, positions),
                    "sliding_attention": self.rotary_emb_local(x, positions)}
            for layer in self.layers:
                x = layer(x, position_embeddings=rope[layer.attention_type], attention_mask=masks[layer.attention_type],
                          position_ids=positions)
                x = x[0] if isinstance(x, (tuple, list)) else x
            return self.norm(x)

    model = TwoRopes(config)
    if swapped:
        full, local = model.rotary_emb.inv_freq.clone(), model.rotary_emb_local.inv_freq.clone()
        model.rotary_emb.inv_freq.set_value(local)
        model.rotary_emb_local.inv_freq.set_value(full)
    return model.eval()


@pytest.fixture(scope="module")
def torch_model():
    torch.manual_seed(0)
    return transformers.Gemma3TextModel(transformers.Gemma3TextConfig(**TINY)).eval()


@pytest.mark.parametrize("swapped", [False, True])
def test_gemma3s_two_rotary_embeddings_pair_by_the_layer_type_using_each(torch_model, swapped):
    from paddleformers.transformers.gemma3_text.configuration import Gemma3TextConfig
    from portcheck import compare_forward, convert
    ids = np.random.RandomState(0).randint(0, 100, (2, 6)).astype("int64")
    p = two_ropes(Gemma3TextConfig(**TINY, fuse_rms_norm=False), swapped)
    convert(torch_model, p, inputs=ids)
    report = compare_forward(torch_model, p, {"input_ids": ids}, isolate=True, outputs={"last_hidden_state": 0})
    # torch's first call computes the sliding layers' table: Paddle's rotary_emb_local, whatever the values say
    assert {t: q for t, q in report.pairing.pairs.items() if t.startswith("rotary")} == \
        {"rotary_emb": "rotary_emb_local", "rotary_emb#2": "rotary_emb"}, report.pairing.pairs
    assert any(line.startswith("rotary_emb, rotary_emb#2: like calls the layers after them choose from, paired with "
                               "Paddle's rotary_emb_local, rotary_emb by running each order") for line in
               report.outputs_said), report.outputs_said
    rotary = [r for r in report.rows if r.name.startswith("rotary_emb")]
    assert len(rotary) == 4, [r.name for r in report.rows]  # each call's cos and sin
    if not swapped:
        assert report.passed and all(r.passed for r in rotary), report.table()
    else:
        assert report.first_diverging == "rotary_emb[0]" and not any(r.passed for r in rotary), report.table()
        assert report.differing[:2] == ["rotary_emb", "rotary_emb#2"], report.differing
