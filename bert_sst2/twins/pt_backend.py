"""The PyTorch Backend of the Step 5 loop (twins/train.py's Backend protocol); pd_backend.py is its twin."""
import os

import torch
from torch import distributed as dist
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

from bert_sst2 import paths
from bert_sst2.twins import pt_data, pt_optim
from bert_sst2.twins.weights import load_torch_checkpoint, strict_state, torch_fingerprint, torch_model
from models import pt_bert
from portcheck.core.errors import PipelineError


def entries(state) -> dict:
    """{name: (shape, dtype)} of a state dict's tensors; anything else is a misfit."""
    if not isinstance(state, dict):
        return {}
    return {str(k): ((tuple(v.shape), str(v.dtype).removeprefix("torch.")) if isinstance(v, torch.Tensor)
                     else (("not a tensor",), "")) for k, v in state.items()}


class Backend:  # implements twins.train.Backend
    name = "torch"

    def __init__(self):
        self.model = torch_model()
        self.train_model = self.model  # what train_step calls: the model, or its DistributedDataParallel wrapper
        self.tokenizer = pt_data.tokenizer()
        self.world = 1

    def distribute(self):
        """(rank, world size); under torchrun, gloo collectives and DistributedDataParallel."""
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        if self.world == 1:
            return 0, 1
        dist.init_process_group("gloo")
        self.train_model = DistributedDataParallel(self.model)
        return dist.get_rank(), self.world

    def all_sum(self, values):
        if self.world == 1:
            return list(values)
        summed = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(summed)
        return summed.tolist()

    def leave(self):
        if self.world > 1:
            dist.destroy_process_group()

    def build(self, total_steps, warmup_steps, lr):
        self.optimizer, self.scheduler = pt_optim.build(self.model, lr, "linear", warmup_steps, total_steps)

    def head(self, dataset, n):
        return dataset.select(range(min(n, len(dataset))))

    def encode(self, dataset):
        return pt_data.encode(dataset, self.tokenizer)

    def loader(self, encoded, order, batch_size):
        return pt_data.loader(encoded, self.tokenizer, order, batch_size)

    def lengths(self, encoded):
        return [len(ids) for ids in encoded["input_ids"]]

    def batch_len(self, batch):
        return len(batch["labels"])

    def seed(self, n):
        torch.manual_seed(n)  # dropout masks: reproducible within torch, never equal to Paddle's

    def share_dropout(self, stream):
        pt_bert.set_dropout_stream(self.model, stream)

    def set_train(self, on):
        self.model.train(on)

    def train_step(self, batch, weight):
        lr = pt_optim.current_lr(self.optimizer)
        logits = self.train_model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits, batch["labels"])
        (loss * weight).backward()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad()
        return loss.item(), lr

    @torch.no_grad()
    def evaluate(self, encoded, indices, batch_size):
        """(correct, count) over encoded[indices], counted by Step 2's pt_data.Accuracy."""
        was_training = self.model.training
        self.model.eval()
        metric = pt_data.Accuracy()
        for batch in pt_data.loader(encoded, self.tokenizer, indices, batch_size):
            metric.update(self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]),
                          batch["labels"])
        self.model.train(was_training)
        return metric.correct, metric.count

    def named_arrays(self):
        return ((n, p.detach().numpy()) for n, p in self.model.named_parameters())

    def save_state(self, folder):
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict()}, paths.step5_state(folder, self.name))

    def load_state(self, folder):
        # torch's restricted unpickler: tensors and plain containers, never code
        state = load_torch_checkpoint(paths.step5_state(folder, self.name), paths.rerun())
        # load_state_dict checks the model's keys and shapes, but takes an optimizer state with misshapen,
        # mistyped or missing moments (Adam then fails at the first step, or restarts its moments unseen)
        try:
            strict_state(entries(self.model.state_dict()), entries(state["model"]), "the saved model")
            saved = state["optimizer"].get("state") if isinstance(state["optimizer"], dict) else None
            strict_state(self.optimizer_entries(), entries({f"{i}.{k}": v for i, s in (saved or {}).items()
                                                            if isinstance(s, dict) for k, v in s.items()}),
                         "the saved optimizer state")
            if not isinstance(state["scheduler"], dict) or not isinstance(state["scheduler"].get("last_epoch"), int):
                raise PipelineError("its scheduler state has no step count")
        except PipelineError as e:
            raise PipelineError(f"{folder}: not a checkpoint of this model ({e}); run without --resume") from None
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise PipelineError(f"{folder}: not a checkpoint of this model ({type(e).__name__}: "
                                f"{str(e).splitlines()[0][:200]}); run without --resume") from None

    def optimizer_entries(self) -> dict:
        """{"<index>.<name>": (shape, dtype)} of every entry AdamW's state holds once it has stepped: its step
        and two moments per trainable parameter, indexed as optimizer.state_dict() numbers them;
        pd_backend's has the same role."""
        out = {}
        for group_state, group in zip(self.optimizer.state_dict()["param_groups"], self.optimizer.param_groups):
            for i, p in zip(group_state["params"], group["params"]):
                if p.requires_grad:
                    shape, dtype = tuple(p.shape), str(p.dtype).removeprefix("torch.")
                    out.update({f"{i}.step": ((), "float32"), f"{i}.exp_avg": (shape, dtype),
                                f"{i}.exp_avg_sq": (shape, dtype)})
        return out

    def fingerprint(self):
        return torch_fingerprint(self.model)
