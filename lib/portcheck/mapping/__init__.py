"""Which torch module and weight is which Paddle one: names (a name map's forms), modules (a model's modules as a
record holds them), pairing (the two runs' module calls aligned), alignment (each side's calls, how alike two are,
one alignment pass, the pairs the structure forbids), paired (Pairing: what the pairing chose, as data), ties (what
the alignment cannot settle by shape), fused (fused layers and their packed parts), recipes (known fused layouts),
layouts (the per-type tensor rules), held (the Paddle layer types holding torch's own layout, by type), trace (one side's run recorded, and which framework a model is), convert
(weights converted to Paddle's layout), tensors (a torch model's tensors, each with its Paddle name and layout rule),
module_pairs (each torch module's counterpart for a conversion, or why it has none), settle (the groups only the
run's order pairs, a fused module's layout, a bias's parts' order), inferred (a fused module no one declared and its candidate layouts),
torch_fused (a torch module holding what Paddle layers hold apart, its layout settled by the run),
lists (lists of like modules, an MoE's experts, paired by their index), loose (a tensor one side holds as a module,
the other as a bare parameter of the parent; 0-d against [1] scalars; a layer of another type holding a Linear's
tensors), two_levels (one tensor a torch module and its Linear child both hold, against a Paddle module holding it
bare: an LM head's bias), own_layout (a type no layout names holding tensors of its own, placed by its counterpart's
shapes), pointwise (a 1x1 convolution against a Linear: one matrix, reshaped), parted (a Linear's bias its torch
parent holds in parts, one part perhaps a constant buffer, against a port's one bias), taken (one index taken on either side
of a module: torch's output judged as the index its forward takes), regroup (the same values with axes split and
reordered: a head-split output, a parameter of merged axes), state (the converted state, written: save_pdparams),
weights (strict loading), shards (a single-card state cut into each tensor-parallel rank's shard, checked), settings
(each module's settings in torch's conventions: what `run` compares and a record keeps).

May import portcheck.core; torch and Paddle only inside the functions handed their models."""
