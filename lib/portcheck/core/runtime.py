"""Process settings for every entry script: `import portcheck.core.runtime` before torch or paddle load.

The math libraries read these variables when they are first imported, so the import
comes first in each script (a library module never imports this: it would be too late
and would hide the dependency). Every variable a user has set already wins.

* offline: nothing may reach a model or dataset hub at run time; a user who wants the hub
  sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE / HF_DATASETS_OFFLINE to 0;
* threads: Paddle's CPU kernels use one thread unless OMP_NUM_THREADS says otherwise, while
  torch uses every core; both get all cores, for a fair race;
* MKL_DEBUG_CPU_TYPE=5: the MKL build Paddle bundles picks its slow generic code path on AMD
  CPUs; 5 selects the AVX2 path (3x faster matmul measured on this AMD EPYC machine). Intel
  CPUs ignore it;
* no framework flag: a Paddle FLAGS_* setting holds for the whole process, so it would change the
  user's model too. FLAGS_use_stride_kernel=0 (faster for a model whose transposes feed matmuls,
  docs/bench/speed.md) makes Paddle 3.3.1's `Tensor.view` return its input unchanged; none is set;
* malloc: glibc hands every block over its mmap threshold straight to the kernel and back, so a
  framework allocating the same multi-MB activation or the 47 MB embedding gradient every step pays
  fresh page faults each time. keep_large_blocks raises the thresholds so freed blocks are reused;
  the process keeps up to its peak memory. A user's own MALLOC_MMAP_THRESHOLD_ wins;
* notices: harmless notices that every process repeats are silenced by their exact message,
  nothing else: Paddle's two-line "WARNING: OMP_NUM_THREADS set to N, not 1 ... PLEASE USE
  OMP_NUM_THREADS WISELY." (printed to stderr at import whenever more than one thread is asked for,
  which is set above on purpose), setuptools' "Setuptools is replacing distutils" warning and
  Paddle's missing-ccache warning (a C++ build cache; nothing here compiles C++);
* one line for what run_main cannot catch, because it happens while a script's imports run: Ctrl-C
  (exit 130) and a package missing from the environment.
"""
import ctypes
import os
import sys
import warnings

from portcheck.core.notices import QUIET_WARNINGS, QuietStderr

OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def keep_large_blocks(mmap_threshold=256 << 20, trim_threshold=512 << 20):
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, mmap_threshold)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, trim_threshold)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        pass


def one_line_excepthook(kind, value, tb):
    """Ctrl-C and a missing package during a script's imports end in one line, not a traceback."""
    if issubclass(kind, KeyboardInterrupt):
        sys.stdout.flush()
        print("error: interrupted (Ctrl-C) while loading; nothing was written, run the command again [PC004]",
              file=sys.stderr, flush=True)
        os._exit(130)
    if issubclass(kind, ModuleNotFoundError):
        print(f"error: {value}: activate the project's venv (. .venv/bin/activate) or run "
              "`pip install -r requirements.txt` [PC005]", file=sys.stderr)
        return
    sys.__excepthook__(kind, value, tb)


def apply():
    for var in OFFLINE:
        os.environ.setdefault(var, "1")
    os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")
    keep_large_blocks()
    for message in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = one_line_excepthook
    if not isinstance(sys.stderr, QuietStderr) and sys.stderr is not None:
        sys.stderr = QuietStderr(sys.stderr)


apply()
