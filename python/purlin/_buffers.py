"""What a collective is given, read without depending on torch: tensors and
any object with __cuda_array_interface__ (CAI), datatypes, reduction ops,
streams and V counts, each turned into the plain values the C call takes.

torch is optional: it is imported on first need and only when importable;
with it, outputs can be allocated and the default stream is
torch.cuda.current_stream(). Every refusal is an InvalidArgumentError raised
before the library is called. The collectives themselves are in comm.py.
"""

import ctypes
import enum
import sys

from .errors import InvalidArgumentError, Result


class DataType(enum.IntEnum):
    """purlinDataType_t (runtime/purlin.h)."""

    FLOAT32 = 0
    FLOAT16 = 1
    BFLOAT16 = 2
    FP8_E4M3 = 3
    FP8_E5M2 = 4
    INT32 = 5


class RedOp(enum.IntEnum):
    """purlinRedOp_t (runtime/purlin.h)."""

    SUM = 0
    MAX = 1
    MIN = 2


ELEMENT_BYTES = {
    DataType.FLOAT32: 4,
    DataType.FLOAT16: 2,
    DataType.BFLOAT16: 2,
    DataType.FP8_E4M3: 1,
    DataType.FP8_E5M2: 1,
    DataType.INT32: 4,
}

# torch dtype names (str(torch.float32) without "torch.", the same names
# that ml_dtypes and numpy-style .dtype objects use) -> purlin datatypes.
_DTYPE_NAMES = {
    "float32": DataType.FLOAT32,
    "float16": DataType.FLOAT16,
    "bfloat16": DataType.BFLOAT16,
    "float8_e4m3fn": DataType.FP8_E4M3,
    "float8_e5m2": DataType.FP8_E5M2,
    "int32": DataType.INT32,
}

# CAI typestrs that say the type on their own (little-endian, as CUDA is).
_TYPESTRS = {"<f4": DataType.FLOAT32, "<f2": DataType.FLOAT16, "<i4": DataType.INT32}
_COUNT_TYPESTRS = ("<i8", "<u8")
_COUNT_NAMES = ("int64", "uint64")

_UNSET = object()
_torch = _UNSET


def torch_module():
    """torch if importable (imported once), else None. Tests replace
    `_buffers._torch` to see the package as it is without torch."""
    global _torch
    if _torch is _UNSET:
        try:
            import torch  # noqa: F401  (optional dependency)

            _torch = torch
        except ImportError:
            _torch = None
    return _torch


def _is_torch_tensor(obj):
    # A torch tensor can only exist once torch is imported; no import here.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _fail(fn, text):
    raise InvalidArgumentError(Result.INVALID_ARGUMENT, "%s: %s" % (fn, text))


def _device_of(obj):
    """The CUDA ordinal a CAI object declares through a `device` attribute
    (int, "cuda:N", an object with .id (CuPy) or .index (torch.device)),
    -1 for host memory, None when it declares none (the library then checks
    the pointer itself)."""
    dev = getattr(obj, "device", None)
    if dev is None:
        return None
    if isinstance(dev, bool):
        return None
    if isinstance(dev, int):
        return dev
    if isinstance(dev, str):
        if dev == "cpu":
            return -1
        if dev.startswith("cuda:") and dev[5:].isdigit():
            return int(dev[5:])
        if dev == "cuda":
            return None
        return None
    kind = getattr(dev, "type", None)
    if kind == "cpu":
        return -1
    for attr in ("index", "id"):
        value = getattr(dev, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class Buffer:
    """One array argument as the C call needs it."""

    __slots__ = ("obj", "ptr", "shape", "numel", "dtype", "dtype_name", "device",
                 "contiguous", "readonly", "stream", "is_torch")

    def __repr__(self):
        return "<%s %s on %s>" % (self.dtype_name, tuple(self.shape),
                                  "unknown device" if self.device is None else
                                  ("host" if self.device < 0 else "cuda:%d" % self.device))


def _contiguous(shape, strides, itemsize):
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _dtype_name(dtype):
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = str(dtype)
    return name[6:] if name.startswith("torch.") else name


def as_buffer(obj, fn, what, counts=False):
    """Reads a torch tensor or a CAI object. `counts` asks for an int64 (or
    uint64) array, the V forms' device counts; otherwise the datatype must
    be one of purlin's."""
    b = Buffer()
    b.obj = obj
    if _is_torch_tensor(obj):
        if str(obj.layout) != "torch.strided":
            _fail(fn, "%s is a %s tensor; collectives take dense (strided) tensors" % (
                what, obj.layout))
        b.is_torch = True
        b.ptr = int(obj.data_ptr())
        b.shape = tuple(obj.shape)
        b.numel = int(obj.numel())
        b.dtype_name = _dtype_name(obj.dtype)
        b.device = obj.device.index if obj.device.type == "cuda" else -1
        b.contiguous = bool(obj.is_contiguous())
        b.readonly = False
        b.stream = None
    else:
        b.is_torch = False
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is None:
            _fail(fn, "%s is a %s, neither a torch tensor nor an object with "
                  "__cuda_array_interface__" % (what, type(obj).__name__))
        if not isinstance(cai, dict) or "shape" not in cai or "typestr" not in cai \
                or "data" not in cai:
            _fail(fn, "%s's __cuda_array_interface__ lacks shape, typestr or data" % what)
        if cai.get("mask") is not None:
            _fail(fn, "%s is a masked array; collectives take plain arrays" % what)
        data = cai["data"]
        if not isinstance(data, (tuple, list)) or len(data) != 2:
            _fail(fn, "%s's __cuda_array_interface__['data'] is not (pointer, readonly)" % what)
        b.ptr = int(data[0] or 0)
        b.readonly = bool(data[1])
        b.shape = tuple(int(x) for x in cai["shape"])
        b.numel = 1
        for x in b.shape:
            b.numel *= x
        typestr = cai["typestr"]
        # bfloat16 and fp8 have no typestr of their own (NumPy's "<V2",
        # "|V1"); such objects name their type through .dtype.
        dtype_attr = getattr(obj, "dtype", None)
        named = _dtype_name(dtype_attr) if dtype_attr is not None else None
        if typestr in _TYPESTRS:
            b.dtype_name = {v: k for k, v in _DTYPE_NAMES.items()}[_TYPESTRS[typestr]]
        elif typestr in _COUNT_TYPESTRS:
            b.dtype_name = _COUNT_NAMES[_COUNT_TYPESTRS.index(typestr)]
        elif named in _DTYPE_NAMES and typestr.lstrip("<>|=")[1:].isdigit() and \
                int(typestr.lstrip("<>|=")[1:]) == ELEMENT_BYTES[_DTYPE_NAMES[named]]:
            b.dtype_name = named
        else:
            b.dtype_name = "typestr %r" % typestr + (" (dtype %s)" % named if named else "")
        itemsize = int(typestr.lstrip("<>|=")[1:]) if typestr.lstrip("<>|=")[1:].isdigit() else 1
        b.contiguous = _contiguous(b.shape, cai.get("strides"), itemsize)
        b.device = _device_of(obj)
        stream = cai.get("stream")
        b.stream = int(stream) if stream is not None else None
    if counts:
        if b.dtype_name not in _COUNT_NAMES:
            _fail(fn, "%s on the device must be int64 (or uint64), not %s" % (what, b.dtype_name))
        b.dtype = None
    else:
        dtype = _DTYPE_NAMES.get(b.dtype_name)
        if dtype is None:
            _fail(fn, "%s has datatype %s; purlin supports %s" % (
                what, b.dtype_name, ", ".join(_DTYPE_NAMES)))
        b.dtype = dtype
    if not b.contiguous:
        _fail(fn, "%s is not contiguous (shape %s); pass a contiguous tensor "
              "(e.g. .contiguous())" % (what, b.shape))
    return b


def check_device(b, device, fn, what):
    """Refuses a buffer on another GPU, or on the host, than the rank's."""
    if b.device is None:
        return
    if b.device < 0:
        _fail(fn, "%s is in host memory; collectives take tensors on the rank's GPU "
              "(cuda:%d)" % (what, device))
    if b.device != device:
        _fail(fn, "%s is on cuda:%d but this rank runs on cuda:%d" % (what, b.device, device))


def reduce_op(op, fn):
    """A RedOp from RedOp, its name ("sum", "max", "min", any case) or any
    object whose .name is one of those (torch.distributed.ReduceOp.SUM)."""
    if isinstance(op, RedOp):
        return op
    if isinstance(op, int) and not isinstance(op, bool):
        try:
            return RedOp(op)
        except ValueError:
            pass
    name = op if isinstance(op, str) else getattr(op, "name", None)
    if not isinstance(name, str):
        name = str(op).rsplit(".", 1)[-1]
    try:
        return RedOp[name.upper()]
    except KeyError:
        _fail(fn, "op %r is not one of sum, max, min" % (op,))


def stream_handle(stream, device, send, fn):
    """The cudaStream_t to launch on, as an int.

    stream None: torch.cuda.current_stream(device) when torch is importable
    and sees a GPU; else the stream the input's __cuda_array_interface__
    names (the producer's, so ordering holds); else the legacy default
    stream (NULL). Otherwise an int handle, a torch.cuda.Stream or any
    object with `cuda_stream` (int), CuPy's `ptr`, or Numba's `handle`."""
    if stream is None:
        torch = torch_module()
        if torch is not None and ((send is not None and send.is_torch) or
                                  torch.cuda.is_available()):
            return int(torch.cuda.current_stream(device).cuda_stream)
        if send is not None and send.stream is not None:
            return send.stream
        return 0
    if isinstance(stream, bool):
        _fail(fn, "stream %r is not a CUDA stream" % (stream,))
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    handle = getattr(stream, "handle", None)
    if isinstance(handle, ctypes.c_void_p):
        return handle.value or 0
    if isinstance(handle, int):
        return handle
    _fail(fn, "stream %r is not a CUDA stream (give an int handle, a torch.cuda.Stream or "
          "an object with cuda_stream)" % (stream,))


class Counts:
    """V counts: a host array (ctypes, kept alive for the call) with the
    values known, or a device pointer with the values unknown to the host."""

    __slots__ = ("ptr", "values", "keep")


def counts_arg(counts, n, device, fn, what="counts"):
    """Reads V counts: a CUDA int64 tensor / CAI array of `n` elements (its
    pointer is passed; the GPU reads it when the collective runs) or a
    sequence of `n` non-negative ints (nested sequences are flattened, for
    AllToAllV's matrix)."""
    c = Counts()
    if _is_torch_tensor(counts) and counts.device.type == "cpu":
        counts = counts.reshape(-1).tolist()  # host values, read now
    elif _is_torch_tensor(counts) or hasattr(counts, "__cuda_array_interface__"):
        b = as_buffer(counts, fn, what, counts=True)
        check_device(b, device, fn, what)
        if b.numel != n:
            _fail(fn, "%s has %d elements, expected %d" % (what, b.numel, n))
        if b.ptr == 0 and n > 0:
            _fail(fn, "%s is a NULL device pointer" % what)
        c.ptr, c.values, c.keep = b.ptr, None, counts
        return c
    values = []
    try:
        for item in counts:
            if isinstance(item, (list, tuple)):
                values.extend(item)
            else:
                values.append(item)
    except TypeError:
        _fail(fn, "%s must be a sequence of ints or a CUDA int64 tensor, not %s" % (
            what, type(counts).__name__))
    if len(values) != n:
        _fail(fn, "%s has %d values, expected %d" % (what, len(values), n))
    out = []
    for i, v in enumerate(values):
        try:
            iv = int(v)
        except (TypeError, ValueError):
            _fail(fn, "%s[%d] is %r, not an int" % (what, i, v))
        if iv != v or iv < 0:
            _fail(fn, "%s[%d] is %r; counts are non-negative ints" % (what, i, v))
        if iv >= 1 << 62:
            _fail(fn, "%s[%d] is %d, more than 2^62" % (what, i, iv))
        out.append(iv)
    arr = (ctypes.c_size_t * max(n, 1))(*out)
    c.ptr, c.values, c.keep = ctypes.addressof(arr), out, arr
    return c
