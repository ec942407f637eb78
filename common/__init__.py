"""Shared, framework-free pieces of the pipeline: paths, config, diff checking, data, training loop.

Importing this package sets the runtime environment, so scripts import it
before torch or paddle (the math libraries read these variables when loaded):

* offline: nothing may reach a model or dataset hub at run time; a user who
  wants the hub sets these variables to 0 before running;
* threads: Paddle's CPU kernels use one thread unless OMP_NUM_THREADS says
  otherwise, while torch uses every core; both get all cores, for a fair race;
* MKL_DEBUG_CPU_TYPE=5: the MKL build Paddle bundles picks its slow generic
  code path on AMD CPUs; 5 selects the AVX2 path (3x faster matmul measured on
  this AMD EPYC machine). Intel CPUs ignore it.
* FLAGS_use_stride_kernel=0: Paddle 3's default makes transpose/slice return strided views,
  and every later consumer (reshape, matmul, their gradients) turns them back into contiguous
  memory with a slow element-by-element copy; off, transpose is one fast contiguous kernel.
  Only memory layout changes, the numbers are bit for bit the same (18% of a train step,
  22% of an eval forward on this machine; docs/speed.md). torch ignores it.
* malloc: glibc hands every block over its mmap threshold straight to the kernel and back, so
  a framework allocating the same multi-MB activation or the 47 MB embedding gradient every step
  pays fresh page faults each time (Paddle's CPU kernels notably: a 2M-float add took 5.5 ms
  instead of 0.5). _keep_large_blocks raises the thresholds so freed blocks are reused; the
  process keeps up to its peak memory instead of returning it at once. Both frameworks get it.
  A user's own MALLOC_MMAP_THRESHOLD_ wins.
"""
import ctypes
import os
import sys
import warnings

for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")
os.environ.setdefault("FLAGS_use_stride_kernel", "0")


def _keep_large_blocks(mmap_threshold=256 << 20, trim_threshold=512 << 20):
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, mmap_threshold)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, trim_threshold)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        pass


_keep_large_blocks()
# Paddle warns at import that ccache (a C++ build cache) is missing; nothing here compiles C++.
warnings.filterwarnings("ignore", message="No ccache found")
