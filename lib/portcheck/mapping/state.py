"""The converted state: {Paddle key: array} made on demand from torch's tensors in Paddle's layout (State, and Joined
for a fused module's parts), the keys that name one Paddle tensor, and the state written as a .pdparams.

May import portcheck.core and portcheck.mapping.fused and .parted; Paddle only inside the functions handed its tensors."""
from collections.abc import Mapping

import numpy as np

from portcheck.mapping import fused, parted
from portcheck.mapping.fused import Fused


def names_of_one_tensor(params: dict) -> dict:
    """{Paddle key: every key of its tensor}. Paddle's RNN layers list each weight twice (weight_ih_l0 and
    0.cell_fw.weight_ih: one tensor): a key is filled when any name of its tensor is."""
    aliases = {}
    for k, v in params.items():
        aliases.setdefault(getattr(v, "name", k), []).append(k)
    return {k: group for group in aliases.values() for k in group}


class Joined:
    """A Paddle tensor of a fused module made of its parts' torch tensors (portcheck.mapping.fused): each part's columns
    where the Paddle module's Fused declares them. Stands where a (Tensor, array) pair stands in a State."""
    tie = ""

    def __init__(self, spec: Fused, parts: list):
        self.spec, self.parts = spec, parts  # [(Tensor, torch array)] in the spec's part order

    def to_paddle(self, _=None):
        return fused.join_parts(self.spec, [t.to_paddle(a) for t, a in self.parts])

    transposed = False


class State(Mapping):
    """{Paddle key: numpy array} of a conversion, each array made when it is read, from the torch tensor it comes
    from in Paddle's layout: the weights are never held twice (a 1.1B-parameter pair's would be 4.4 GB more).
    dict(state) is a copy of them all, at that moment."""

    def __init__(self, tensors: dict, origin: dict = None):
        self._tensors = tensors  # {Paddle key: (Tensor, its torch array)}
        self.aliases = {}        # {another Paddle key of the same tensor (an RNN's weight_ih_l0): its key}
        self.origin = origin or {}  # {Paddle key: the torch key it was filled from}
        self.kept, self.said = [], ""  # Paddle keys left at their own value (unused by the run), and its one line
        self.fused_found = {}  # {Paddle module: Fused} a layout no one declared, settled by the run (convert)

    def carried(self) -> dict:
        """{Paddle key: (its torch key, whether its layout is transposed)}: what record.model_fingerprint(model,
        port=state) reads on either side, so each side fingerprints its own weights under torch's names."""
        return {k: (self.origin[k], tensor.transposed) for k, (tensor, _) in self._tensors.items()}

    def cut(self, key) -> list:
        """The torch keys a Paddle key is made of when it is not one whole torch tensor (a part of a fused or packed
        module's, or several joined), else []: such a key is fingerprinted in Paddle's layout on both sides."""
        tensor, _ = self._tensors[key]
        if isinstance(tensor, Joined):
            return [t.source for t, _ in tensor.parts]
        if tensor.joined:  # a vector its parent holds in parts: those it saves (a constant buffer is no weight)
            return [k for k, c in tensor.joined if c is None]
        return [tensor.source] if tensor.source and tensor.source != self.origin.get(key) else []

    def from_torch(self, key, read) -> np.ndarray:
        """A cut key's array (cut) in Paddle's layout, made from the torch tensors read(torch key) gives."""
        tensor, _ = self._tensors[key]
        if isinstance(tensor, Joined):
            return Joined(tensor.spec, [(t, read(t.source)) for t, _ in tensor.parts]).to_paddle()
        if tensor.joined:
            return parted.value(tensor, read)
        return tensor.to_paddle(read(tensor.source))

    def view(self, key) -> np.ndarray:
        """The array in Paddle's layout, as a view of torch's where the layout allows (no copy)."""
        tensor, array = self._tensors[self.aliases.get(key, key)]
        return tensor.to_paddle(array)

    def __getitem__(self, key) -> np.ndarray:
        view = self.view(key)
        return np.ascontiguousarray(view).reshape(view.shape)  # a 0-d parameter stays 0-d

    def __contains__(self, key) -> bool:  # Mapping's would make the key's array (a fused one joined) to say it
        return key in self._tensors or key in self.aliases

    def __iter__(self):
        yield from self._tensors
        yield from self.aliases

    def __len__(self) -> int:
        return len(self._tensors) + len(self.aliases)

    @property
    def transposed(self) -> int:
        """How many of its tensors are Linear weights, turned from torch's [out, in] into Paddle's [in, out]."""
        return sum(tensor.transposed for tensor, _ in self._tensors.values())


_DTYPES = {}


def numpy_dtype(tensor) -> np.dtype:
    """A Paddle tensor's dtype as numpy's (paddle.float32 -> float32), without copying the tensor."""
    if tensor.dtype not in _DTYPES:
        import paddle
        _DTYPES[tensor.dtype] = paddle.empty([0], dtype=tensor.dtype).numpy().dtype
    return _DTYPES[tensor.dtype]


def save_pdparams(state: dict, path):
    """{key: array or Paddle tensor} as a .pdparams; tensors are saved as they are, not copied first."""
    import paddle
    from portcheck.core.fileio import atomic_write
    tensors = lambda: {k: v if isinstance(v, paddle.Tensor) else paddle.to_tensor(v) for k, v in state.items()}
    atomic_write(path, lambda tmp: paddle.save(tensors(), str(tmp)))


def load_into(paddle_model, state: dict):
    """Set a state on the Paddle model (convert has already set its own)."""
    paddle_model.set_state_dict(state)
    return paddle_model
