"""How a torch module's name becomes its Paddle counterpart's: one resolver for every name map form."""
import re

from portcheck.core.errors import PipelineError, raised_by
from portcheck.core.keys import ROOT
from portcheck.mapping.modules import META


def resolve(name_map):
    """A callable torch module name -> Paddle module name, from:

    * None: the same names;
    * a dict {torch prefix: Paddle prefix}: the longest prefix that matches whole name parts wins
      ({"resnet.embedder.embedder.convolution": "conv1", "classifier.1": "fc"}); "(model)" or "" is the model
      itself, on either side ({"model": "(model)"}: torch's `model` and every module in it is the Paddle model's);
    * a list of (regex, replacement) rules, applied in order with re.sub to the whole name
      ([(r"^encoder\\.stages\\.(\\d)\\.", r"layer\\1."), ...]); a name made "(model)" or "" is the model itself
      ([("^embeddings$", "(model)")]: a ViT's embeddings, holding the tables the port's model holds);
    * a callable, used as it is.
    """
    return _checked(_resolve(name_map))


def entries(name_map):
    """A callable torch module name -> the Paddle module name name_map gives it, or None where the map says
    nothing of it (portcheck.mapping.pairing pairs those automatically): a dict names the modules under its prefixes,
    a rule list those one of its patterns matches, a callable those it renames."""
    if name_map is None:
        return lambda name: None
    mapped = resolve(name_map)
    if isinstance(name_map, dict):
        prefixes = [rooted(p) for p in name_map]
        return lambda name: mapped(name) if any(p == "" or name == p or name.startswith(p + ".") for p in prefixes) \
            else None
    if isinstance(name_map, (list, tuple)):
        patterns = [re.compile(pattern) for pattern, _ in name_map]
        return lambda name: mapped(name) if any(p.search(name) for p in patterns) else None
    return lambda name: None if mapped(name) == name else mapped(name)


def _checked(fn):
    """fn, with its failures (the user's own function, a regex replacement) and its non-str answers said in
    one line naming the module it was asked about."""
    def mapped(name):
        with raised_by(f"name_map failed on {name!r}"):
            target = fn(name)
        if not isinstance(target, str):
            raise PipelineError(f"name_map gave {type(target).__name__} {target!r} for {name!r}: it must give a "
                                "Paddle module name (a str) [PC305]")
        return target
    return mapped


def _resolve(name_map):
    if name_map is None:
        return lambda name: name
    if callable(name_map):
        return name_map
    if isinstance(name_map, dict):
        bad = [(k, v) for k, v in name_map.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise PipelineError(f"name_map: a dict maps torch name prefixes (str) to Paddle ones (str), got "
                                f"{bad[0][0]!r}: {bad[0][1]!r} [PC306]")
        targets = {rooted(k): rooted(v) for k, v in name_map.items()}
        prefixes = sorted(targets, key=len, reverse=True)

        def by_prefix(name):
            whole = "" if name == ROOT else name
            for p in prefixes:
                if whole == p or whole.startswith(p + ".") or p == "":
                    rest = whole[len(p):].lstrip(".")
                    return ".".join(part for part in (targets[p], rest) if part) or ROOT
            return name
        return by_prefix
    if isinstance(name_map, (list, tuple)):
        try:
            rules = [(re.compile(pattern), repl) for pattern, repl in name_map]
        except (TypeError, ValueError, re.error) as e:
            raise PipelineError(f"name_map: each rule must be (regex, replacement): {e} [PC307]") from None

        def by_rules(name):
            for pattern, repl in rules:
                name = pattern.sub(repl, name)
            return name
        return by_rules
    raise PipelineError(f"name_map must be None, a dict, a list of (regex, replacement) or a callable, "
                        f"got {type(name_map).__name__} [PC304]")


def rooted(name: str) -> str:
    """A dict name map's prefix, the model itself ("(model)", as reports name it, or "") as ""."""
    return "" if name == ROOT else name


def _modules(record: dict) -> set:
    """Every module a record describes (describe's mod/ keys: called or not), the model itself as ROOT."""
    return {key[len(META):].rpartition("/")[0] for key in record if key.startswith(META)}


def named_exist(name_map, torch_record: dict, paddle_record: dict):
    """Refuse, in one line naming every one, a dict name map's entries naming a module a model does not have: a
    torch prefix no module has, or a torch module mapped to a Paddle name that is no module (left out, it would go
    unjudged)."""
    if not isinstance(name_map, dict):
        return
    t_modules, p_modules = _modules(torch_record), _modules(paddle_record)
    if not t_modules or not p_modules:  # records without their models' description: nothing to hold the map to
        return
    bad = []
    for key, target in name_map.items():
        if not isinstance(key, str) or not isinstance(target, str) or rooted(key) == "":
            continue  # names.resolve says what is wrong with such an entry
        if key not in t_modules and not any(m.startswith(key + ".") for m in t_modules):
            bad.append(f"{key!r}: {target!r} (the torch model has no module {key!r})")
        elif key in t_modules and target and target not in p_modules:
            bad.append(f"{key!r}: {target!r} (the Paddle model has no module {target!r})")
    if bad:
        raise PipelineError(f"name_map entries naming no module: {'; '.join(bad[:5])}"
                            + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
                            + ": name the models' own modules (report.pairs() lists them) [PC314]")


def parent_of_paired(layer: str, by_paddle: dict):
    """The torch module a Paddle layer that holds no weight of its own stands for: the one parent of the torch
    modules its paired children stand for, as deep above them as they are below it (paddlenlp's ALBERT embeddings,
    whose position_ids buffer transformers' embeddings hold unsaved); None when they name no one parent."""
    parents = set()
    for p, t in by_paddle.items():
        if layer and p.startswith(layer + ".") and t != ROOT:
            depth, parts = p[len(layer) + 1:].count(".") + 1, t.split(".")
            parents.add(".".join(parts[:-depth]) if len(parts) > depth else None)
    return parents.pop() if len(parents) == 1 else None
