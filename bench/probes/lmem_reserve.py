"""lmem_reserve.py -- how much device memory does purlin's local memory
(the kernels' stack frames) take? Prints free device memory and the
context's per-thread stack limit (cudaLimitStackSize) before purlin, after
8 ranks' communicators, and after one session of each (the megakernel's
first launch), and again after a second session.

    PURLIN_LIBRARY=.gpu/libpurlin.so python3 bench/probes/lmem_reserve.py
"""
import ctypes
import os
import sys

os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))

import torch  # noqa: E402
import purlin  # noqa: E402


def cudart():
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    return None


RT = cudart()


def stack_limit():
    if RT is None:
        return -1
    v = ctypes.c_size_t(0)
    return v.value if RT.cudaDeviceGetLimit(ctypes.byref(v), 0) == 0 else -1


def show(what, base):
    torch.cuda.synchronize()
    free = torch.cuda.mem_get_info()[0]
    print("%-34s free %8.1f MiB  (%+8.1f MiB)  stack limit %6d B/thread"
          % (what, free / 2**20, (free - base) / 2**20, stack_limit()))
    return free


torch.zeros(1, device="cuda")
base = show("torch context", torch.cuda.mem_get_info()[0])
comms = purlin.init_all([0] * 8)
show("8 communicators", base)
streams = [torch.cuda.Stream() for _ in comms]
for rep in range(2):
    for c, s in zip(comms, streams):
        c.session_begin(s)
    for c, s in zip(comms, streams):
        c.session_end(s)
    show("after session %d" % (rep + 1), base)
for c in comms:
    c.destroy()
show("communicators destroyed", base)
