"""The Paddle side's start from the torch side's initial weights (portcheck.scripts.hooks_paddle's PaddleSide takes
it as a base): the Paddle model filled from the torch record in Paddle's layout (state0/), each module paired with no
map on the two first forwards (mapping.pairing), each tensor placed as judge_backward pairs it (backward._counterpart),
a model split in tensor parallel filled with its rank's part, a fused module's tensors joined from their parts, and
what the run shows unused kept at Paddle's own value. Torch is not imported."""
from portcheck.mapping import fused, parted
from portcheck.scripts.wrapping import ties


class PaddleStart:
    """The start from torch's weights, for PaddleSide (its paddle, run, placed, joins, flipped and split)."""

    def start_from_torch(self, model, given: dict, first):
        """The model's weights set to the torch side's initial ones (given: the torch record), every Paddle key
        filled, every shape equal, before the first is set; else one line. first: the script's first call
        (trace.Arguments, torch's batch 0 in it), on which the model runs once for the pairing. Returns the pairing's calls
        {torch call: Paddle call} and record keys {torch key: Paddle key} (outputs.counterparts).
        A tensor one side alone holds is no problem where the run shows it unused (its module not called by that
        side's first forward) or the model fills it itself (a buffer, Paddle's position ids; a torch tensor without
        a gradient): kept at that side's own value, named in the configuration (one_sided), the comparison
        deciding. A torch name of a tied tensor (a head's weight tied to the embedding's: tied/ keys) is filled
        through the name paired; tied on torch's side and two tensors on Paddle's is said (untied), and so is the
        converse (untied_torch: torch's head a Linear of its own, Paddle's a matmul with the embedding's weight).
        A Paddle module --layouts declares fused (paddlenlp's qkv_proj) pairs by its parts, each with a torch module,
        and starts from their tensors joined as convert joins them (_join)."""
        from portcheck.core.errors import PipelineError
        split = self._split(model)
        from portcheck.gradients.backward import _counterpart, renames
        from portcheck.mapping.layouts import CONFIGS_DIFFER, flipped
        from portcheck.mapping.state import names_of_one_tensor
        from portcheck.forward.outputs import counterparts
        from portcheck.mapping.trace import Recorder, call, eval_mode
        from portcheck.core.keys import ROOT, module_of, split_key
        from portcheck.mapping import loose
        from portcheck.mapping.modules import NAMES, describe
        from portcheck.mapping.pairing import pair
        rec = Recorder()
        handles = rec.attach(model)
        try:
            with eval_mode(model), self.paddle.no_grad():
                call(model, first, self.to_tensor)
        except Exception as e:  # noqa: BLE001 - a split layer fed another width than its shard's: named
            if split is None:
                raise
            raise self.run.refuse(split.stopped(rec.arrays, e)) from None
        finally:
            for h in handles:
                h.remove()
        # each side's fused or packed modules seen as their parts (the torch side's marked in its record: TorchSide)
        torch_trace = fused.cut({k: v for k, v in given.items() if k.startswith(("mod/", NAMES, "out/", "in/",
                                                                                 fused.KEY))}, False)
        specs = fused.specs(model, self.run.layouts)  # Paddle's fused modules: each part paired, the parts joined below
        paddle_trace = fused.cut(fused.mark({**describe(model), **rec.arrays}, specs, model), False) if split is None \
            else split.whole_trace(rec.arrays)
        renamed = renames(given, paddle_trace)  # read before mark() redescribes the modules it pairs with none
        loose.mark(torch_trace, paddle_trace)  # a Linear against its parent's bare parameters: as convert pairs them
        try:
            paired = pair(torch_trace, paddle_trace)
            modules = paired.modules()
        except PipelineError as e:
            raise self.run.refuse(f"its model does not pair with the torch model's: {e}")
        params = model.state_dict() if split is None else split.full_params()
        state, problems, placed, said = {}, [], {}, set()  # said: Paddle keys a problem names already
        tied, missing, unplaced = ties(given), [], []
        ran = lambda trace: {module_of(split_key(k)[1]) for k in trace if k.startswith("out/")}
        torch_ran, paddle_ran = ran(given), ran(rec.arrays)
        # a packed module's parts never run (its forward reads them): used where it ran
        torch_ran |= {p for p in fused.packed_parts(torch_trace) if p.rpartition(".")[0] in torch_ran}
        module = lambda key: key.rpartition(".")[0] or ROOT
        one_sided = {"torch": [], "paddle": [], "tied": []}
        kinds = {k[4:].rpartition("/")[0]: k.rpartition("/")[2] for k in given if k.startswith("mod/")}

        def untied(name):
            """The torch Embedding weight a torch head's weight (a Linear's, [in, out] here) has the shape of, filled in
            Paddle, where nothing Paddle holds takes the head's: Paddle computes its head from the embedding (a matmul
            with its weight), torch holds the head apart. None otherwise."""
            shape = given[f"state0/{name}"].shape
            return next((k for k in placed if len(shape) == 2 and "Linear" in kinds.get(module(name), "")
                         and "Embedding" in kinds.get(module(k), "") and given[f"state0/{k}"].shape == shape[::-1]),
                        None)
        parts = {}  # {Paddle part key (<fused module>.<part>.<tensor>): torch's value}, joined into the module's
        # a layer of a type of its own holding a torch Linear's tensors (OPTLMHead's decoder_weight): as judged
        renamed.update({t: "/" + p for t, p in loose.held_by_type(given, paddle_trace, modules).items()})
        # a square weight under another name, in a module the run uses: PC455's line, the layouts= to declare
        squares = [line for name, line in loose.square_held(given, paddle_trace, modules).items() if name in torch_ran]
        if squares:
            raise self.run.refuse(squares[0])
        layers = {name: type(layer) for name, layer in model.named_sublayers(include_self=True)}
        flips = flipped(given, layers, lambda key: _counterpart(f"w/{key}", modules, renamed).partition("/")[2],
                        self.run.layouts)
        for key in (k for k in given if k.startswith("state0/")):
            target = _counterpart(key, modules, renamed).partition("/")[2]
            if target not in params and module(module(target)) in specs:
                parts[target], placed[key[7:]] = given[key], target
                continue
            if target not in params:
                like = params.get(key[7:])  # the Paddle tensor of its name, which its shape kept from pairing
                if like is None:
                    missing.append(key[7:])
                elif tuple(like.shape) == tuple(given[key].shape):  # the modules did not pair: their tensors differ
                    problems.append(f"torch {key[7:]} and Paddle {key[7:]}, one shape, in modules that do not pair: "
                                    "they hold other tensors (a bias on one side alone?)")
                else:
                    problems.append(f"torch {key[7:]} {list(given[key].shape)} vs Paddle {key[7:]} "
                                    f"{list(like.shape)}: {CONFIGS_DIFFER}")
                if like is not None:
                    said.add(key[7:])
                continue
            value, want = given[key], params[target]
            flip = target in flips.get(key[7:], ())  # held the other way: set_state transposes it
            # 0-d against [1], axes merged, a bare [out, in] against a Linear: the same values (judge_run's shapes)
            fits = loose.as_held(value.T if flip else value, tuple(want.shape),
                                 transposed=renamed.get(key[7:], "").startswith("/"))
            if fits is None:
                problems.append(f"torch {key[7:]} {list(value.shape)} vs Paddle {target} {list(want.shape)}")
            state[target], placed[key[7:]] = value if fits is None or flip else fits, target
        self.joins.clear()
        self.flipped = {target for found in flips.values() for target in found}
        problems += self._join(specs, parts, params, state, {p: t for t, p in placed.items() if p in parts}, said)
        for name in missing:  # a tied name filled through another (the name its tie's module is paired under)
            mates = {tied.get(name, name), *(a for a, f in tied.items() if f == tied.get(name, name))} - {name}
            if any(m in placed for m in mates):
                one_sided["tied"].append(name)
            elif module(name) not in torch_ran or f"grad/{name}" not in given:
                one_sided["torch"].append(name)
            elif untied(name):
                one_sided.setdefault("untied_torch", []).append([name, untied(name), placed[untied(name)]])
            else:
                problems.append(f"torch {name} has no Paddle counterpart")
                unplaced.append(name)
        same = names_of_one_tensor(params)
        unfilled = [k for k in params if k not in said and not any(a in state for a in same[k])]
        trained = {k for k, _ in model.named_parameters()}
        idle = self._unused(model, first, unfilled) if unfilled else set()
        one_sided["paddle"] = [k for k in unfilled if module(k) not in paddle_ran or k not in trained or k in idle]
        unfilled_problems = [k for k in unfilled if k not in one_sided["paddle"]]
        problems += [f"Paddle {k} no torch tensor fills" for k in unfilled_problems]
        for alias, tie in tied.items():  # tied on torch's side, each name placed in a Paddle tensor of its own
            if alias in placed and tie in placed and placed[tie] not in same[placed[alias]]:
                one_sided.setdefault("untied", []).append([alias, tie, placed[alias], placed[tie]])
        self.run.config["one_sided"] = one_sided
        if problems:
            # torch tensors left over and Paddle ones unfilled: perhaps one module against several, which no run infers
            fused_hint = ". A module computing several of the other side's in one (q, k and v in one Linear) is " \
                "declared with --layouts FILE (docs/run.md)" if unplaced and unfilled_problems else ""
            # declared so, and its parts left unpaired: a part pairs with a module holding tensors of its shapes
            lost = [f"{n}.{p}" for n, spec in specs.items() for p in spec.parts if f"{n}.{p}" not in modules.values()]
            if lost:
                fused_hint = f". --layouts declares Paddle's {', '.join(specs)} fused, and its part(s) " \
                    f"{', '.join(lost)} pair with no torch module: each part holds its share of its module's tensors " \
                    "(a bias on one side alone?)"
            joins = parted.joinable(given, paddle_trace)
            if joins:  # a vector torch's parent holds in parts: run does not settle their order, convert does
                name, vector, width, sizes = joins[0]
                fused_hint = (f". torch's {name.rpartition('.')[0] or ROOT} holds Paddle's {name}.{vector} in parts ("
                              f"{', '.join(k.rpartition('.')[2] for k in sizes)}"
                              + (" and a constant it does not save" if sum(sizes.values()) < width else "")
                              + "): run does not start a model from parts; judge the two models with convert(..., "
                              "inputs=) and compare_backward, which settle their order (docs/pairing.md)")
            raise self.run.refuse(f"its model cannot start from the torch model's weights ({len(problems)} "
                                  "problem(s)): " + "; ".join(problems) + fused_hint + " [PC831]")
        self.set_state(model, state if split is None else split.shard(state))
        self.placed = placed  # the kept layers' tensors are placed as the model's (start_kept), parts joined
        return paired.pairs, counterparts(torch_trace, paddle_trace, paired), placed

    def _split(self, model):
        """A model fleet split in tensor parallel: its rank (split_ranks.SplitRank), its place in the run's config;
        None for a whole model. Judged only against torch's one process (the run's torch_whole): else one line."""
        from portcheck.scripts import split_ranks
        name = next((name for name, p in model.named_parameters() if getattr(p, "is_distributed", False)), None)
        if name is None:
            return None
        if not self.run.torch_whole:
            raise self.run.refuse(f"its model is split in tensor parallel ({name} is one rank's shard) and the torch "
                                  "script runs as ranks too: a split Paddle script is judged against torch's script "
                                  "in one process: give --torch \"python pt_train.py\" without a launcher [PC925]")
        if fused.specs(model, self.run.layouts):
            raise self.run.refuse(f"--layouts declares Paddle's {', '.join(fused.specs(model, self.run.layouts))} "
                                  "fused in a model split in tensor parallel: run does not cut a fused module's "
                                  "shards per part; compare it with portcheck.parallel.split.compare_split(layouts=) "
                                  "[PC935]")
        if self.standins_error:  # standins' own line, coded (PC425, PC428)
            raise self.run.refuse(self.standins_error)
        self.split = split_ranks.SplitRank(model, *split_ranks.split_of(model))
        self.run.config[split_ranks.SPLIT] = self.split.config(self.standins)
        return self.split

    def _join(self, specs: dict, parts: dict, params: dict, state: dict, torch_keys: dict, said: set) -> list:
        """Each tensor of a Paddle fused module (specs: fused.specs) made of its parts' torch values (parts: {Paddle
        part key: value}), as convert joins them (fused.join), into state; the joins made kept (self.joins: {Paddle
        key: (Fused, [part keys])}). Returns the problems: a part's tensor no Paddle tensor takes, a join not of the
        Paddle tensor's shape, each Paddle key named added to said. A tensor none of whose parts torch fills is left
        unfilled (said as such)."""
        problems, used = [], set()
        for name, spec in specs.items():
            for tensor in {k.rpartition(".")[2] for k in parts if k.rpartition(".")[0] in
                           {f"{name}.{p}" for p in spec.parts}}:
                keys, whole = [f"{name}.{p}.{tensor}" for p in spec.parts], f"{name}.{tensor}"
                if whole not in params:
                    continue
                used.update(keys)
                lost = [k.rpartition(".")[0] for k in keys if k not in parts]
                if lost:
                    said.add(whole)
                    problems.append(f"Paddle {whole} no torch tensor fills whole: its part(s) {', '.join(lost)} "
                                    "pair with no torch module")
                    continue
                value = fused.join(spec, [parts[k] for k in keys])
                if value is None or tuple(value.shape) != tuple(params[whole].shape):
                    said.add(whole)
                    problems.append(f"torch {' + '.join(torch_keys[k] for k in keys)} "
                                    f"{' + '.join(str(list(parts[k].shape)) for k in keys)} vs Paddle {whole} "
                                    f"{list(params[whole].shape)} (its Fused: {len(spec.parts)} parts"
                                    f"{f' of {spec.heads} heads' if spec.heads else ''})")
                    continue
                state[whole], self.joins[whole] = value, (spec, keys)
        problems += [f"torch {torch_keys[k]} has no Paddle counterpart (Paddle {k.rpartition('.')[0]} pairs with its "
                     f"module, and {k.rpartition('.')[0].rpartition('.')[0]} holds no {k.rpartition('.')[2]})"
                     for k in parts if k not in used]
        return problems

    def _unused(self, model, first, keys) -> set:
        """Of the parameters `keys` names, those no output of the model depends on (paddlenlp's BertModel computes its
        pooler for a token classifier, which returns the sequence's logits alone): the gradient of its outputs' sum
        reaches none of them. Its forward in eval mode, .grad untouched; none where Paddle cannot tell."""
        from portcheck.mapping.trace import call, eval_mode
        paddle = self.paddle
        with eval_mode(model):
            out = call(model, first, self.to_tensor)
        found = []
        todo = [out]
        while todo:
            v = todo.pop()
            if isinstance(v, paddle.Tensor):
                if not v.stop_gradient and v.dtype in (paddle.float32, paddle.float64, paddle.float16, paddle.bfloat16):
                    found.append(v)
            elif isinstance(v, dict):
                todo += list(v.values())
            elif isinstance(v, (tuple, list)):
                todo += list(v)
            elif hasattr(v, "to_tuple"):  # a ModelOutput
                todo += list(v.to_tuple())
        named = [(k, p) for k, p in model.named_parameters() if k in keys and not p.stop_gradient]
        if not found or not named:
            return set()
        try:
            grads = paddle.grad(paddle.add_n([v.sum() for v in found]), [p for _, p in named], allow_unused=True)
        except (RuntimeError, ValueError):  # a parameter Paddle's grad cannot reach (an RNN's weight storage)
            return set()
        return {k for (k, _), g in zip(named, grads) if g is None}
