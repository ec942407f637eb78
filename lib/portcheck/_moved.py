"""The module paths of before (portcheck.compare is now portcheck.forward.compare; portcheck.forward.stream, of a
subpackage that held it, is now portcheck.checkpoints.stream): each old path still imports, for one version, as the
very module of its new path (monkeypatching either patches both), with a DeprecationWarning naming the new path. No
file is left at an old path; remove this module in the next version."""
import importlib
import importlib.machinery
import sys
import warnings

LAYERS = {"core": ("errors", "fileio", "record", "same_run", "tolerances", "diff", "calibrated", "report", "spill",
                   "runtime"),
          "mapping": ("names", "pairing", "fused", "convert", "weights", "recipes"),
          "forward": ("compare", "isolate", "plot", "calls"),
          "checkpoints": ("stream",),
          "gradients": ("backward", "weight_stats"),
          "pipeline": ("data", "steps", "handin", "training"),
          "scripts": ("run", "runconfig", "recorder", "hooks_torch", "hooks_paddle")}
# modules moved out of a subpackage into new subpackages of their own: {old subpackage: {new one: its modules}}
SPLIT_OFF = {"forward": {"checkpoints": ("checkpoint", "stream", "formers_folders", "split_folders", "fleet"),
                         "parallel": ("split", "split_rank", "standins")}}
MOVED = {f"portcheck.{m}": f"portcheck.{layer}.{m}" for layer, modules in LAYERS.items() for m in modules}
MOVED |= {f"portcheck.{old}.{m}": f"portcheck.{new}.{m}"
          for old, news in SPLIT_OFF.items() for new, modules in news.items() for m in modules}


class _Alias:  # a meta path finder and its loader (importlib.abc's protocols; importing it costs ~10 ms)
    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        warnings.warn(f"{name} moved to {MOVED[name]}: import it from there ({name} goes in the next version)",
                      DeprecationWarning, stacklevel=2)
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        # the import system set the old path's spec on the module: its own is put back (pickle, reload, -m)
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())  # before an editable install's finder, which maps portcheck.* to its files
