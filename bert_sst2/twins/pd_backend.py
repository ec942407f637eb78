"""The Paddle Backend of the Step 5 loop (twins/train.py's Backend protocol); pt_backend.py is its twin."""
import paddle
from paddle import distributed as dist
from paddle.nn import functional as F
from paddlenlp.datasets import MapDataset

from bert_sst2 import paths
from bert_sst2.twins import pd_data, pd_optim
from bert_sst2.twins.weights import load_paddle_checkpoint, paddle_fingerprint, paddle_model, strict_state
from models import pd_bert
from portcheck.core.errors import PipelineError


def entries(state) -> dict:
    """{name: (shape, dtype)} of a state dict's tensors (the optimizer's LR_Scheduler entry aside); anything
    else is a misfit."""
    if not isinstance(state, dict):
        return {}
    return {k: ((tuple(v.shape), str(v.dtype).removeprefix("paddle.")) if isinstance(v, paddle.Tensor)
                else (("not a tensor",), "")) for k, v in state.items() if k != "LR_Scheduler"}


# Step 5's Paddle process runs pd_bert alone, whose logits are bit for bit the same with these: transposes and slices
# as contiguous kernels, not strided views its matmuls copy element by element (docs/bench/speed.md). A flag holds
# for the whole process, so it is this script's choice, never the library's (under it Tensor.view returns its input).
STEP5_FLAGS = {"FLAGS_use_stride_kernel": False}


class Backend:  # implements twins.train.Backend
    name = "paddle"

    def __init__(self):
        paddle.set_flags(STEP5_FLAGS)
        self.model = paddle_model()
        self.train_model = self.model  # what train_step calls: the model, or its DataParallel wrapper
        self.tokenizer = pd_data.tokenizer()
        self.world = 1

    def distribute(self):
        """(rank, world size); under paddle.distributed.launch, gloo collectives on CPU and DataParallel."""
        self.world = dist.get_world_size()  # PADDLE_TRAINERS_NUM, set by the launcher
        if self.world == 1:
            return 0, 1
        dist.init_parallel_env()
        self.train_model = paddle.DataParallel(self.model)
        return dist.get_rank(), self.world

    def all_sum(self, values):
        if self.world == 1:
            return list(values)
        summed = paddle.to_tensor(values, dtype="float64")
        dist.all_reduce(summed)
        return summed.tolist()

    def leave(self):
        if self.world > 1:
            dist.destroy_process_group()

    def build(self, total_steps, warmup_steps, lr):
        self.optimizer, self.scheduler = pd_optim.build(self.model, lr, "linear", warmup_steps, total_steps)

    def head(self, dataset, n):
        return MapDataset(dataset.data[:n])

    def encode(self, dataset):
        return pd_data.encode(dataset, self.tokenizer)

    def loader(self, encoded, order, batch_size):
        return pd_data.loader(encoded, self.tokenizer, order, batch_size)

    def lengths(self, encoded):
        return [len(example["input_ids"]) for example in encoded]

    def batch_len(self, batch):
        return len(batch["labels"])

    def seed(self, n):
        paddle.seed(n)  # dropout masks: reproducible within Paddle, never equal to torch's

    def share_dropout(self, stream):
        pd_bert.set_dropout_stream(self.model, stream)

    def set_train(self, on):
        self.model.train() if on else self.model.eval()

    def train_step(self, batch, weight):
        lr = pd_optim.current_lr(self.optimizer)
        logits = self.train_model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits, batch["labels"])
        (loss * weight).backward()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.clear_grad()
        return loss.item(), lr

    @paddle.no_grad()
    def evaluate(self, encoded, indices, batch_size):
        """(correct, count) over encoded[indices], counted by Step 2's pd_data.Accuracy."""
        was_training = self.model.training
        self.model.eval()
        metric = pd_data.Accuracy()
        for batch in pd_data.loader(encoded, self.tokenizer, indices, batch_size):
            metric.update(self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]),
                          batch["labels"])
        self.set_train(was_training)
        return metric.correct, metric.count

    def named_arrays(self):
        return ((n, p.numpy()) for n, p in self.model.named_parameters())

    def save_state(self, folder):
        paddle.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                     "scheduler": self.scheduler.state_dict()},
                    str(paths.step5_state(folder, self.name)))

    def load_state(self, folder):
        # portcheck.fileio's restricted unpickler: plain containers and arrays, never code (paddle.load would)
        state = load_paddle_checkpoint(paths.step5_state(folder, self.name), paths.rerun())
        # set_state_dict only warns on a missing or misshapen entry and takes an empty optimizer state as a
        # fresh one: every entry is checked first, as torch's load_state_dict does
        try:
            strict_state(entries(self.model.state_dict()), entries(state["model"]), "the saved model")
            strict_state(self.optimizer_entries(), entries(state["optimizer"]), "the saved optimizer state")
            if not isinstance(state["scheduler"], dict) or not isinstance(state["scheduler"].get("last_epoch"), int):
                raise PipelineError("its scheduler state has no step count")
        except PipelineError as e:
            raise PipelineError(f"{folder}: not a checkpoint of this model ({e}); run without --resume") from None
        try:
            self.model.set_state_dict(state["model"])
            self.optimizer.set_state_dict(state["optimizer"])
            self.scheduler.set_state_dict(state["scheduler"])
        except (KeyError, TypeError, ValueError, RuntimeError, AssertionError) as e:
            raise PipelineError(f"{folder}: not a checkpoint of this model ({type(e).__name__}: "
                                f"{str(e).splitlines()[0][:200]}); run without --resume") from None

    def optimizer_entries(self) -> dict:
        """{name: (shape, dtype)} of every entry AdamW's state holds once it has stepped: two moments and two
        beta powers per trainable parameter (Paddle's accumulator names); pt_backend's has the same role."""
        out = {}
        for p in self.model.parameters():
            if not p.stop_gradient:
                shape, dtype = tuple(p.shape), str(p.dtype).removeprefix("paddle.")
                out.update({f"{p.name}_moment1_0": (shape, dtype), f"{p.name}_moment2_0": (shape, dtype),
                            f"{p.name}_beta1_pow_acc_0": ((1,), dtype), f"{p.name}_beta2_pow_acc_0": ((1,), dtype)})
        return out

    def fingerprint(self):
        return paddle_fingerprint(self.model)
