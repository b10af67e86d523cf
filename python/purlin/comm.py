"""Communicators, the seven collectives, sessions and groups.

A Communicator is one rank. Every collective checks its arguments here
(device, contiguity, datatype, sizes) and raises InvalidArgumentError before
the library is called, then makes one call of purlin.h on a stream; the
library checks again (alignment, overlap, host memory) and its refusals
arrive as the matching purlin.Error with its message. Semantics are NCCL's:
counts are in elements, every rank makes the same calls in the same order,
results are ready in stream order. What tensors look like to the package
(torch or __cuda_array_interface__) is in _buffers.py.
"""

import contextlib
import ctypes
import dataclasses

from . import _buffers
from ._buffers import DataType, RedOp, as_buffer, check_device, counts_arg, reduce_op, \
    stream_handle
from ._library import ConfigStruct, UniqueIdStruct, PURLIN_CONFIG_MAGIC, \
    PURLIN_CONFIG_VERSION, PURLIN_MAX_RANKS, PURLIN_UNIQUE_ID_BYTES, check, lib
from .errors import InvalidArgumentError, NoDeviceError, Result, error_for

PATH_AUTO = 0
PATH_LATENCY = 1
PATH_THROUGHPUT = 2


@dataclasses.dataclass
class Config:
    """purlinConfig_t with PURLIN_CONFIG_INITIALIZER's defaults; see purlin.h
    for each field's meaning and range (the library checks them)."""

    # 0: chosen from the placement (Communicator.megakernel_ctas tells it).
    megakernel_ctas: int = 0
    timeout_ms: int = 10000
    latency_buffer_bytes: int = 4160 << 10
    throughput_buffer_bytes: int = 256 << 20
    path: int = PATH_AUTO
    collective_ctas: int = 0
    # Address space of each rank's window for symmetric buffers (mem_alloc,
    # register); 0 disables them.
    window_bytes: int = 64 << 30

    def _struct(self):
        return ConfigStruct(ctypes.sizeof(ConfigStruct), PURLIN_CONFIG_MAGIC,
                            PURLIN_CONFIG_VERSION, self.megakernel_ctas, self.timeout_ms,
                            self.latency_buffer_bytes, self.throughput_buffer_bytes, self.path,
                            self.collective_ctas, self.window_bytes)


def _config(config, overrides, fn):
    if config is None:
        config = Config()
    elif not isinstance(config, Config):
        raise InvalidArgumentError(Result.INVALID_ARGUMENT,
                                   "%s: config must be a purlin.Config" % fn)
    if overrides:
        names = {f.name for f in dataclasses.fields(Config)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT, "%s: unknown config field(s) %s; known: %s" % (
                    fn, ", ".join(unknown), ", ".join(sorted(names))))
        config = dataclasses.replace(config, **overrides)
    return config._struct()


def _query(handle, name):
    value = ctypes.c_int()
    check(getattr(lib(), name)(handle, ctypes.byref(value)), handle)
    return value.value


class SymmetricBuffer:
    """A purlinMemAlloc buffer: `nbytes` at device address `ptr` of its
    communicator's GPU. Exposes __cuda_array_interface__ (bytes), so torch,
    CuPy and the collectives of this package take it directly."""

    def __init__(self, comm, ptr, nbytes):
        self._comm = comm
        self.ptr = ptr
        self.nbytes = nbytes

    @property
    def __cuda_array_interface__(self):
        if self.ptr is None:
            raise InvalidArgumentError(Result.INVALID_ARGUMENT,
                                       "SymmetricBuffer: already freed")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "version": 3, "strides": None}

    def tensor(self):
        """The buffer as a torch uint8 tensor on its GPU (it keeps the
        buffer alive)."""
        torch = _buffers.torch_module()
        if torch is None:
            raise InvalidArgumentError(Result.INVALID_ARGUMENT, "SymmetricBuffer.tensor: needs torch")
        return torch.as_tensor(self, device="cuda:%d" % self._comm.device)

    def free(self):
        """purlinMemFree (local; after the work on it completed). A buffer
        of a destroyed communicator was released with it; freeing twice
        does nothing."""
        if self.ptr is None:
            return
        ptr, self.ptr = self.ptr, None
        if self._comm.live:
            check(lib().purlinMemFree(self._comm.handle, ptr), self._comm.handle)

    def __del__(self):
        try:
            self.free()
        except Exception:  # at interpreter exit, or a dead library: nothing to do
            pass

    def __repr__(self):
        return "SymmetricBuffer(rank=%d, ptr=%s, nbytes=%d)" % (
            self._comm.rank, hex(self.ptr) if self.ptr else None, self.nbytes)


class Communicator:
    """One rank of a purlin communicator. Made by init_all, init_rank or
    init_rank_from_env; released by destroy() or abort(), or by leaving a
    `with` block. Not released by garbage collection: purlin.h forbids
    destroying a rank while its kernels may still run, which only the
    caller knows."""

    def __init__(self, handle):
        self._handle = handle
        self._live = True
        self._rank = _query(handle, "purlinCommUserRank")
        self._nranks = _query(handle, "purlinCommCount")
        self._device = _query(handle, "purlinCommCuDevice")
        self._empty = None

    @classmethod
    def _unbound(cls, nranks, rank, device):
        """A communicator with a NULL handle and the given shape: every
        argument check of the package runs, and a call that passes them
        reaches the library, which refuses the NULL handle. For host tests."""
        self = cls.__new__(cls)
        self._handle, self._rank, self._nranks, self._device = None, rank, nranks, device
        self._live = True
        self._empty = None
        return self

    # --- identity and lifetime -------------------------------------------

    @property
    def rank(self):
        return self._rank

    @property
    def nranks(self):
        return self._nranks

    size = nranks

    @property
    def device(self):
        """The CUDA ordinal this rank runs on."""
        return self._device

    @property
    def megakernel_ctas(self):
        """The CTAs (one SM each) a session's megakernel holds on this rank's
        GPU: Config.megakernel_ctas, or the library's choice where that is 0."""
        return _query(self._live_handle("megakernel_ctas"), "purlinCommMegakernelCtas")

    @property
    def handle(self):
        """The purlinComm_t as an int (for C extensions); None once released."""
        return self._live_handle("handle")

    @property
    def live(self):
        """False once destroy() or abort() released the rank."""
        return self._live

    def __repr__(self):
        state = "" if self.live else ", released"
        return "<purlin.Communicator rank %d of %d on cuda:%d%s>" % (
            self._rank, self._nranks, self._device, state)

    def _live_handle(self, fn):
        if not self.live:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT,
                "%s: rank %d's communicator was already destroyed or aborted" % (fn, self._rank))
        return self._handle

    def _release(self, name):
        handle = self._live_handle(name)
        check(getattr(lib(), name)(handle), handle)
        self._handle = None
        self._live = False

    def destroy(self):
        """purlinCommDestroy. Refused (InvalidUsageError, nothing changes)
        while a session is open. Destroying twice raises."""
        self._release("purlinCommDestroy")

    def abort(self):
        """purlinCommAbort: raises the group's abort word (every device-side
        wait of every rank leaves its loop; peers report RemoteError) and
        releases this rank."""
        self._release("purlinCommAbort")

    def get_async_error(self):
        """The first asynchronous failure of the group (device-side timeout,
        ranks that disagree, a peer's abort) as a purlin.Error, not raised;
        None while there is none."""
        handle = self._live_handle("get_async_error")
        code = ctypes.c_int()
        check(lib().purlinCommGetAsyncError(handle, ctypes.byref(code)), handle)
        if code.value == Result.SUCCESS:
            return None
        text = lib().purlinGetLastError(handle)
        return error_for(code.value, text.decode("utf-8", "replace") if text else "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.live:
            self.destroy()
        return False

    # --- symmetric buffers ----------------------------------------------

    def mem_alloc(self, nbytes):
        """purlinMemAlloc: `nbytes` of device memory on this rank's GPU that
        every peer maps in its window, so collectives on it run in place
        between processes too (README, Symmetric buffers). Collective with
        one process per GPU (every rank, same sizes, same order). Returns a
        SymmetricBuffer (a __cuda_array_interface__ of bytes; .tensor()
        views it as torch), freed by .free() or when it is garbage."""
        fn = "mem_alloc"
        handle = self._live_handle(fn)
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
            raise InvalidArgumentError(Result.INVALID_ARGUMENT,
                                       "%s: nbytes must be a positive int, not %r" % (fn, nbytes))
        ptr = ctypes.c_void_p()
        check(lib().purlinMemAlloc(handle, nbytes, ctypes.byref(ptr)), handle)
        return SymmetricBuffer(self, ptr.value, nbytes)

    def empty_symmetric(self, shape, dtype):
        """A torch tensor of `shape` and `dtype` (uninitialised) on a
        symmetric buffer of its size (mem_alloc); the buffer lives as long
        as the tensor (and its views)."""
        torch = _buffers.torch_module()
        if torch is None:
            raise InvalidArgumentError(Result.INVALID_ARGUMENT,
                                       "empty_symmetric: needs torch")
        if isinstance(shape, int):
            shape = (shape,)
        numel = 1
        for d in shape:
            numel *= int(d)
        itemsize = torch.empty((), dtype=dtype).element_size()
        buf = self.mem_alloc(max(numel * itemsize, 1))
        return buf.tensor()[:numel * itemsize].view(dtype).view(tuple(shape))

    # --- collectives -----------------------------------------------------

    def _input(self, fn, x):
        b = as_buffer(x, fn, "input")
        check_device(b, self._device, fn, "input")
        return b

    def _output(self, fn, out, inp, numel, shape, what="out"):
        """Checks `out` against the expected element count, or allocates it
        (torch only)."""
        if out is None:
            torch = _buffers.torch_module()
            if torch is None:
                raise InvalidArgumentError(
                    Result.INVALID_ARGUMENT,
                    "%s: %s= is required without torch (the package allocates outputs "
                    "only as torch tensors)" % (fn, what))
            dtype = inp.obj.dtype if inp.is_torch else getattr(torch, _torch_name(inp.dtype))
            t = torch.empty(shape, dtype=dtype, device="cuda:%d" % self._device)
            return as_buffer(t, fn, what), True
        b = as_buffer(out, fn, what)
        check_device(b, self._device, fn, what)
        if b.readonly:
            raise InvalidArgumentError(Result.INVALID_ARGUMENT,
                                       "%s: %s is read-only (its __cuda_array_interface__ "
                                       "says so)" % (fn, what))
        if b.dtype != inp.dtype:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT, "%s: %s is %s but input is %s; they must match" % (
                    fn, what, b.dtype_name, inp.dtype_name))
        if b.numel != numel:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT,
                "%s: %s has %d elements (shape %s), expected %d for input of %d elements "
                "on %d ranks" % (fn, what, b.numel, b.shape, numel, inp.numel, self._nranks))
        return b, False

    def _launch(self, fn, cname, args, inp, out, allocated, stream):
        handle = self._live_handle(fn)
        s = stream_handle(stream, self._device, inp, fn)
        if allocated:
            _keep_for_stream(out.obj, s, self._device)
        code = getattr(lib(), cname)(*args, handle, s)
        check(code, handle)
        return out.obj

    def _split(self, fn, inp, what="input"):
        if inp.numel % self._nranks:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT, "%s: %s has %d elements, not a multiple of the %d "
                "ranks" % (fn, what, inp.numel, self._nranks))
        return inp.numel // self._nranks

    def all_reduce(self, input, out=None, op=RedOp.SUM, stream=None):
        """out[i] = op over ranks of input[i]. In place with out=input.
        Returns out (allocated like input when not given, torch only)."""
        fn = "all_reduce"
        inp = self._input(fn, input)
        o, alloc = self._output(fn, out, inp, inp.numel, inp.shape)
        r = reduce_op(op, fn)
        return self._launch(fn, "purlinAllReduce", (inp.ptr, o.ptr, inp.numel, inp.dtype, r),
                            inp, o, alloc, stream)

    def all_reduce_residual_rmsnorm(self, input, residual, weight, eps, out=None,
                                    residual_out=None, out_fp8=None, scale=1.0, stream=None):
        """The fused AllReduce + residual add + RMSNorm of a decode step
        (purlinAllReduceResidualRMSNorm): s = sum over ranks of input;
        residual_out = s + residual; out = residual_out / rms(residual_out) *
        weight, row by row over the last dimension (hidden = weight.numel()),
        in fp32 in a fixed order, so the bits do not depend on size or path.
        float16 or bfloat16. With out_fp8 (a float8_e4m3fn tensor of as many
        elements) also out_fp8 = e4m3(y * scale) of the unrounded y. In place:
        out=input, residual_out=residual. Returns (out, residual_out),
        allocated like input when not given (torch only)."""
        fn = "all_reduce_residual_rmsnorm"
        inp = self._input(fn, input)
        res = as_buffer(residual, fn, "residual")
        check_device(res, self._device, fn, "residual")
        w = as_buffer(weight, fn, "weight")
        check_device(w, self._device, fn, "weight")
        for what, b in (("residual", res), ("weight", w)):
            if b.dtype != inp.dtype:
                raise InvalidArgumentError(
                    Result.INVALID_ARGUMENT, "%s: %s is %s but input is %s; they must match" % (
                        fn, what, b.dtype_name, inp.dtype_name))
        if res.numel != inp.numel:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT, "%s: residual has %d elements, input %d" % (
                    fn, res.numel, inp.numel))
        hidden = w.numel
        if hidden == 0 or inp.numel % hidden:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT, "%s: input's %d elements are not whole rows of "
                "weight's %d" % (fn, inp.numel, hidden))
        o, alloc = self._output(fn, out, inp, inp.numel, inp.shape)
        ro, ralloc = self._output(fn, residual_out, inp, inp.numel, inp.shape, "residual_out")
        q = None
        if out_fp8 is not None:
            q = as_buffer(out_fp8, fn, "out_fp8")
            check_device(q, self._device, fn, "out_fp8")
            if q.dtype != DataType.FP8_E4M3 or q.numel != inp.numel or q.readonly:
                raise InvalidArgumentError(
                    Result.INVALID_ARGUMENT, "%s: out_fp8 must be a writable float8_e4m3fn "
                    "buffer of %d elements (it is %s, %d elements)" % (
                        fn, inp.numel, q.dtype_name, q.numel))
        handle = self._live_handle(fn)
        s = stream_handle(stream, self._device, inp, fn)
        for b, allocated in ((o, alloc), (ro, ralloc)):
            if allocated:
                _keep_for_stream(b.obj, s, self._device)
        if q is None:
            code = lib().purlinAllReduceResidualRMSNorm(
                inp.ptr, res.ptr, w.ptr, float(eps), o.ptr, ro.ptr, inp.numel, hidden,
                inp.dtype, handle, s)
        else:
            code = lib().purlinAllReduceResidualRMSNormFp8(
                inp.ptr, res.ptr, w.ptr, float(eps), float(scale), o.ptr, ro.ptr, q.ptr,
                inp.numel, hidden, inp.dtype, handle, s)
        check(code, handle)
        return o.obj, ro.obj

    def all_gather(self, input, out=None, stream=None):
        """out = the inputs of ranks 0..n-1 concatenated (along dim 0 when
        allocated). In place: input is rank r's block of out
        (out.view(-1)[r*k:(r+1)*k] for k = input.numel())."""
        fn = "all_gather"
        inp = self._input(fn, input)
        n = self._nranks
        shape = (n * inp.shape[0],) + inp.shape[1:] if inp.shape else (n,)
        o, alloc = self._output(fn, out, inp, n * inp.numel, shape)
        return self._launch(fn, "purlinAllGather", (inp.ptr, o.ptr, inp.numel, inp.dtype),
                            inp, o, alloc, stream)

    def reduce_scatter(self, input, out=None, op=RedOp.SUM, stream=None):
        """out = op over ranks of block `rank` of input (input holds n blocks
        of input.numel()/n elements). In place: out is rank r's block of
        input."""
        fn = "reduce_scatter"
        inp = self._input(fn, input)
        k = self._split(fn, inp)
        n = self._nranks
        if inp.shape and inp.shape[0] % n == 0:
            shape = (inp.shape[0] // n,) + inp.shape[1:]
        else:
            shape = (k,)
        o, alloc = self._output(fn, out, inp, k, shape)
        r = reduce_op(op, fn)
        return self._launch(fn, "purlinReduceScatter", (inp.ptr, o.ptr, k, inp.dtype, r),
                            inp, o, alloc, stream)

    def all_to_all(self, input, out=None, stream=None):
        """Block d of this rank's input goes to rank d, which stores it as
        its block `rank`; blocks are input.numel()/n elements. No in-place
        form."""
        fn = "all_to_all"
        inp = self._input(fn, input)
        k = self._split(fn, inp)
        o, alloc = self._output(fn, out, inp, inp.numel, inp.shape)
        return self._launch(fn, "purlinAllToAll", (inp.ptr, o.ptr, k, inp.dtype),
                            inp, o, alloc, stream)

    def _device_counts_out(self, fn, out):
        if out is None:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT,
                "%s: counts on the device are not known to the host, so out= is required" % fn)

    def _ptrs(self, fn, inp, out, counts):
        if counts.values is not None:
            return inp.ptr, out.ptr
        return self._unsized_ptr(fn, inp), self._unsized_ptr(fn, out)

    def _unsized_ptr(self, fn, buf):
        """The pointer to pass for a buffer of a call whose counts are on the
        device. purlin.h refuses NULL there (the host cannot tell an empty
        block from a missing buffer), and an empty torch tensor's pointer is
        0: it stands in a small device buffer of this rank, which the GPU
        never reads when the counts say the block is empty."""
        if buf.ptr:
            return buf.ptr
        if self._empty is None:
            try:
                import torch
            except ImportError:
                raise InvalidArgumentError(
                    Result.INVALID_ARGUMENT,
                    "%s: an empty buffer (pointer 0) with counts on the device: pass a device "
                    "buffer (any, for an empty block)" % fn) from None
            self._empty = torch.empty(256, dtype=torch.uint8, device="cuda:%d" % self._device)
        return self._empty.data_ptr()

    def all_gather_v(self, input, counts, out=None, stream=None):
        """Rank r sends counts[r] elements; out receives the blocks of ranks
        0..n-1 packed in order. counts: n ints, or a CUDA int64 tensor of n
        elements (read by the GPU when the collective runs; out= required)."""
        fn = "all_gather_v"
        inp = self._input(fn, input)
        c = counts_arg(counts, self._nranks, self._device, fn)
        if c.values is None:
            self._device_counts_out(fn, out)
            o, alloc = self._output_unsized(fn, out, inp), False
        else:
            if inp.numel != c.values[self._rank]:
                raise InvalidArgumentError(
                    Result.INVALID_ARGUMENT, "%s: input has %d elements but counts[%d] is %d" % (
                        fn, inp.numel, self._rank, c.values[self._rank]))
            total = sum(c.values)
            o, alloc = self._output(fn, out, inp, total, (total,))
        return self._launch(fn, "purlinAllGatherV", (*self._ptrs(fn, inp, o, c), c.ptr, inp.dtype),
                            inp, o, alloc, stream)

    def reduce_scatter_v(self, input, counts, out=None, op=RedOp.SUM, stream=None):
        """input holds n blocks packed in order, block r of counts[r]
        elements; out (counts[rank] elements) receives the reduction of
        block `rank`. counts as all_gather_v's."""
        fn = "reduce_scatter_v"
        inp = self._input(fn, input)
        c = counts_arg(counts, self._nranks, self._device, fn)
        if c.values is None:
            self._device_counts_out(fn, out)
            o, alloc = self._output_unsized(fn, out, inp), False
        else:
            total = sum(c.values)
            if inp.numel != total:
                raise InvalidArgumentError(
                    Result.INVALID_ARGUMENT,
                    "%s: input has %d elements but the counts add up to %d" % (
                        fn, inp.numel, total))
            mine = c.values[self._rank]
            o, alloc = self._output(fn, out, inp, mine, (mine,))
        r = reduce_op(op, fn)
        return self._launch(fn, "purlinReduceScatterV",
                            (*self._ptrs(fn, inp, o, c), c.ptr, inp.dtype, r),
                            inp, o, alloc, stream)

    def all_to_all_v(self, input, counts, out=None, stream=None):
        """counts is an n x n matrix (nested sequences, n*n ints, or a CUDA
        int64 tensor of n*n elements): counts[s][d] elements go from rank s
        to rank d, blocks packed in rank order on both sides."""
        fn = "all_to_all_v"
        inp = self._input(fn, input)
        n = self._nranks
        c = counts_arg(counts, n * n, self._device, fn)
        if c.values is None:
            self._device_counts_out(fn, out)
            o, alloc = self._output_unsized(fn, out, inp), False
        else:
            send = sum(c.values[self._rank * n + d] for d in range(n))
            recv = sum(c.values[s * n + self._rank] for s in range(n))
            if inp.numel != send:
                raise InvalidArgumentError(
                    Result.INVALID_ARGUMENT,
                    "%s: input has %d elements but row %d of counts adds up to %d" % (
                        fn, inp.numel, self._rank, send))
            o, alloc = self._output(fn, out, inp, recv, (recv,))
        return self._launch(fn, "purlinAllToAllV", (*self._ptrs(fn, inp, o, c), c.ptr, inp.dtype),
                            inp, o, alloc, stream)

    def _output_unsized(self, fn, out, inp):
        b = as_buffer(out, fn, "out")
        check_device(b, self._device, fn, "out")
        if b.readonly:
            raise InvalidArgumentError(Result.INVALID_ARGUMENT, "%s: out is read-only" % fn)
        if b.dtype != inp.dtype:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT, "%s: out is %s but input is %s; they must match" % (
                    fn, b.dtype_name, inp.dtype_name))
        return b

    # --- sessions ----------------------------------------------------------

    def _session_stream(self, stream, fn):
        return stream_handle(stream, self._device, None, fn)

    def session_begin(self, stream=None):
        """purlinSessionBegin on `stream` (default as for collectives)."""
        handle = self._live_handle("session_begin")
        check(lib().purlinSessionBegin(handle, self._session_stream(stream, "session_begin")),
              handle)

    def session_end(self, stream=None):
        """purlinSessionEnd on `stream`."""
        handle = self._live_handle("session_end")
        check(lib().purlinSessionEnd(handle, self._session_stream(stream, "session_end")),
              handle)

    @contextlib.contextmanager
    def session(self, stream=None):
        """`with comm.session(stream):` runs the block's collectives on the
        rank's resident megakernel (purlinSessionBegin / End on one stream,
        resolved once). Capturable in a CUDA graph; see purlin.h's rules:
        no torch.cuda.synchronize() inside, every rank the same calls."""
        s = self._session_stream(stream, "session")
        self.session_begin(s)
        try:
            yield self
        finally:
            self.session_end(s)


def _torch_name(dtype):
    return {DataType.FLOAT32: "float32", DataType.FLOAT16: "float16",
            DataType.BFLOAT16: "bfloat16", DataType.FP8_E4M3: "float8_e4m3fn",
            DataType.FP8_E5M2: "float8_e5m2", DataType.INT32: "int32"}[dtype]


def _keep_for_stream(tensor, stream, device):
    """An output allocated here on the current stream but written on
    another must not be reused by torch's caching allocator before that
    stream is done with it."""
    torch = _buffers.torch_module()
    current = torch.cuda.current_stream(device)
    if int(current.cuda_stream) != stream:
        tensor.record_stream(torch.cuda.ExternalStream(stream, device=device))


class Communicators(list):
    """The ranks made by init_all, in rank order; a context manager that
    destroys those still live."""

    def destroy(self):
        first = None
        for comm in self:
            if comm.live:
                try:
                    comm.destroy()
                except Exception as e:  # release the others, report the first
                    first = first or e
        if first is not None:
            raise first

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False


def _device_index(d, fn):
    if isinstance(d, bool):
        raise InvalidArgumentError(Result.INVALID_ARGUMENT, "%s: device %r" % (fn, d))
    if isinstance(d, int):
        return d
    index = getattr(d, "index", None)  # torch.device("cuda:3")
    if isinstance(index, int):
        return index
    if isinstance(d, str) and d.startswith("cuda:") and d[5:].isdigit():
        return int(d[5:])
    raise InvalidArgumentError(Result.INVALID_ARGUMENT,
                               "%s: device %r is not a CUDA ordinal" % (fn, d))


def init_all(devices, config=None, **overrides):
    """purlinCommInitAllConfig: several ranks driven by this process.

    devices: a sequence of CUDA ordinals, one per rank (repeat one to place
    several ranks on one GPU; each rank then needs its own stream), or an
    int n for ranks 0..n-1 on devices 0..n-1. config: a purlin.Config, and/or
    its fields as keywords (timeout_ms=..., megakernel_ctas=...).
    Returns Communicators (a list, rank order; a context manager)."""
    fn = "init_all"
    if isinstance(devices, int) and not isinstance(devices, bool):
        nranks, devs = devices, None
    else:
        try:
            devs = [_device_index(d, fn) for d in devices]
        except TypeError:
            raise InvalidArgumentError(
                Result.INVALID_ARGUMENT,
                "%s: devices must be a sequence of CUDA ordinals or an int" % fn) from None
        nranks = len(devs)
    if not 1 <= nranks <= PURLIN_MAX_RANKS:
        raise InvalidArgumentError(
            Result.INVALID_ARGUMENT, "%s: %d ranks; purlin takes 1..%d" % (
                fn, nranks, PURLIN_MAX_RANKS))
    cfg = _config(config, overrides, fn)
    handles = (ctypes.c_void_p * nranks)()
    arr = (ctypes.c_int * nranks)(*devs) if devs is not None else None
    check(lib().purlinCommInitAllConfig(handles, nranks, arr, ctypes.byref(cfg)))
    comms = Communicators()
    for h in handles:
        comms.append(Communicator(h))
    return comms


def get_unique_id():
    """purlinGetUniqueId: 128 bytes naming one rendezvous of init_rank. Make
    it in one process and give the same bytes to every rank (for example
    torch.distributed.broadcast_object_list, or broadcast of
    torch.frombuffer(bytearray(uid), dtype=torch.uint8))."""
    uid = UniqueIdStruct()
    check(lib().purlinGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), PURLIN_UNIQUE_ID_BYTES)


def _unique_id_bytes(unique_id, fn):
    if hasattr(unique_id, "tolist") and not isinstance(unique_id, (bytes, bytearray)):
        unique_id = bytes(int(v) & 0xFF for v in unique_id.reshape(-1).tolist())
    try:
        raw = bytes(unique_id)
    except TypeError:
        raise InvalidArgumentError(
            Result.INVALID_ARGUMENT,
            "%s: unique_id must be bytes from purlin.get_unique_id() (or a uint8 tensor "
            "of them)" % fn) from None
    if len(raw) != PURLIN_UNIQUE_ID_BYTES:
        raise InvalidArgumentError(
            Result.INVALID_ARGUMENT, "%s: unique_id has %d bytes, expected %d" % (
                fn, len(raw), PURLIN_UNIQUE_ID_BYTES))
    return raw


_cuda_driver = None


def _set_current_device(device):
    """Makes `device` current on this thread, for purlinCommInitRank: through
    torch when importable, else the driver's primary context."""
    global _cuda_driver
    torch = _buffers.torch_module()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.set_device(device)
        return
    if _cuda_driver is None:
        try:
            _cuda_driver = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise NoDeviceError(Result.NO_DEVICE,
                                "init_rank: cannot select cuda:%d: no CUDA driver (%s)" % (
                                    device, e)) from None
    drv = _cuda_driver
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    for step, code in (("cuInit", lambda: drv.cuInit(0)),
                       ("cuDeviceGet", lambda: drv.cuDeviceGet(ctypes.byref(dev), device)),
                       ("cuDevicePrimaryCtxRetain",
                        lambda: drv.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
                       ("cuCtxSetCurrent", lambda: drv.cuCtxSetCurrent(ctx))):
        rc = code()
        if rc != 0:
            # cuInit and cuDeviceGet fail when there is no usable GPU.
            result = Result.NO_DEVICE if step in ("cuInit", "cuDeviceGet") else \
                Result.UNHANDLED_CUDA_ERROR
            raise error_for(result, "init_rank: %s failed with CUresult %d selecting cuda:%d"
                            % (step, rc, device))


def init_rank(nranks, rank, unique_id, device=None, config=None, **overrides):
    """purlinCommInitRank: this process's rank of a communicator whose ranks
    are processes (one GPU each). Every rank passes the same nranks,
    unique_id (bytes from get_unique_id) and config. device: the CUDA
    ordinal to run on, made current first (default: the current device,
    e.g. after torch.cuda.set_device)."""
    fn = "init_rank"
    raw = _unique_id_bytes(unique_id, fn)
    cfg = _config(config, overrides, fn)
    if device is not None:
        _set_current_device(_device_index(device, fn))
    uid = UniqueIdStruct()
    ctypes.memmove(ctypes.addressof(uid), raw, PURLIN_UNIQUE_ID_BYTES)
    handle = ctypes.c_void_p()
    check(lib().purlinCommInitRank(ctypes.byref(handle), int(nranks), uid, int(rank),
                                   ctypes.byref(cfg)))
    return Communicator(handle.value)


def init_rank_from_env(config=None, **overrides):
    """purlinCommInitRankFromEnv: rank, size and GPU (the local rank) from
    torchrun's, Open MPI's or Slurm's variables; nothing to share by hand."""
    cfg = _config(config, overrides, "init_rank_from_env")
    handle = ctypes.c_void_p()
    check(lib().purlinCommInitRankFromEnv(ctypes.byref(handle), ctypes.byref(cfg)))
    return Communicator(handle.value)


def group_start():
    check(lib().purlinGroupStart())


def group_end():
    check(lib().purlinGroupEnd())


@contextlib.contextmanager
def group():
    """`with purlin.group():` -- purlinGroupStart / purlinGroupEnd. In a
    session the block's calls run back to back and their outputs are ready
    after the block (NCCL's contract); in eager mode nothing changes."""
    group_start()
    try:
        yield
    finally:
        group_end()


def version():
    """The library's PURLIN_VERSION_CODE (major * 10000 + minor * 100 + patch)."""
    v = ctypes.c_int()
    check(lib().purlinGetVersion(ctypes.byref(v)))
    return v.value


__all__ = [
    "Communicator", "Communicators", "Config", "DataType", "RedOp", "PATH_AUTO",
    "PATH_LATENCY", "PATH_THROUGHPUT", "init_all", "init_rank", "init_rank_from_env",
    "get_unique_id", "group", "group_start", "group_end", "version",
]
