"""Finding and loading libpurlin.so, and the ctypes declarations of purlin.h.

The library is loaded on first use, not at import, so that `import purlin`
works (constants, exceptions) on a machine that has not built it yet, and
so that the failure is a purlin.LibraryNotFoundError that says how to build
it. Where it is looked for, in order:
  1. $PURLIN_LIBRARY, when set (a file path, relative to the working
     directory; nothing else is tried then, so a wrong value is reported);
  2. libpurlin.so in the package directory, then in its parent directory;
  3. at the workspace root two levels up: runtime/libpurlin.so (Bazel
     runfiles), then in a source checkout bazel-bin/runtime/libpurlin.so
     and .gpu/libpurlin.so (tools/build_gpu.sh's staging);
  4. the dynamic loader's own search (LD_LIBRARY_PATH, ldconfig).
Argument checks and the communicator live in comm.py.
"""

import ctypes
import os
import threading

from .errors import LibraryNotFoundError, error_for, Result

PURLIN_UNIQUE_ID_BYTES = 128
PURLIN_CONFIG_MAGIC = 0x70726C6E
PURLIN_CONFIG_VERSION = 1
PURLIN_MAX_RANKS = 32

BUILD_HINT = (
    "build it with `bazel build //runtime:libpurlin.so` and either set "
    "PURLIN_LIBRARY=$(bazel info bazel-bin)/runtime/libpurlin.so or copy that file "
    "next to the purlin package (%s)"
)


class UniqueIdStruct(ctypes.Structure):
    """purlinUniqueId_t: 128 opaque bytes, passed by value."""

    _fields_ = [("internal", ctypes.c_char * PURLIN_UNIQUE_ID_BYTES)]


class ConfigStruct(ctypes.Structure):
    """purlinConfig_t (no padding on LP64: config.c asserts it)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("megakernelCtas", ctypes.c_int),
        ("timeoutMs", ctypes.c_int),
        ("latencyBufferBytes", ctypes.c_size_t),
        ("throughputBufferBytes", ctypes.c_size_t),
        ("path", ctypes.c_int),
        ("collectiveCtas", ctypes.c_int),
        ("windowBytes", ctypes.c_size_t),
    ]


_P = ctypes.c_void_p
_I = ctypes.c_int
_S = ctypes.c_size_t
_RES = ctypes.c_int

# name -> (restype, argtypes), one entry per function of purlin.h that the
# package calls.
_PROTOTYPES = {
    "purlinGetVersion": (_RES, [ctypes.POINTER(_I)]),
    "purlinGetErrorString": (ctypes.c_char_p, [_I]),
    "purlinGetErrorName": (ctypes.c_char_p, [_I]),
    "purlinGetLastError": (ctypes.c_char_p, [_P]),
    "purlinCommInitAll": (_RES, [ctypes.POINTER(_P), _I, ctypes.POINTER(_I)]),
    "purlinCommInitAllConfig": (
        _RES, [ctypes.POINTER(_P), _I, ctypes.POINTER(_I), ctypes.POINTER(ConfigStruct)]),
    "purlinGetUniqueId": (_RES, [ctypes.POINTER(UniqueIdStruct)]),
    "purlinCommInitRank": (
        _RES, [ctypes.POINTER(_P), _I, UniqueIdStruct, _I, ctypes.POINTER(ConfigStruct)]),
    "purlinCommInitRankFromEnv": (_RES, [ctypes.POINTER(_P), ctypes.POINTER(ConfigStruct)]),
    "purlinCommCount": (_RES, [_P, ctypes.POINTER(_I)]),
    "purlinCommUserRank": (_RES, [_P, ctypes.POINTER(_I)]),
    "purlinCommCuDevice": (_RES, [_P, ctypes.POINTER(_I)]),
    "purlinCommMegakernelCtas": (_RES, [_P, ctypes.POINTER(_I)]),
    "purlinCommDestroy": (_RES, [_P]),
    "purlinCommAbort": (_RES, [_P]),
    "purlinCommGetAsyncError": (_RES, [_P, ctypes.POINTER(_I)]),
    "purlinAllReduce": (_RES, [_P, _P, _S, _I, _I, _P, _P]),
    "purlinAllGather": (_RES, [_P, _P, _S, _I, _P, _P]),
    "purlinReduceScatter": (_RES, [_P, _P, _S, _I, _I, _P, _P]),
    "purlinAllToAll": (_RES, [_P, _P, _S, _I, _P, _P]),
    "purlinAllGatherV": (_RES, [_P, _P, _P, _I, _P, _P]),
    "purlinReduceScatterV": (_RES, [_P, _P, _P, _I, _I, _P, _P]),
    "purlinAllToAllV": (_RES, [_P, _P, _P, _I, _P, _P]),
    "purlinAllReduceResidualRMSNorm": (_RES, [_P, _P, _P, ctypes.c_float, _P, _P, _S, _S, _I,
                                               _P, _P]),
    "purlinAllReduceResidualRMSNormFp8": (_RES, [_P, _P, _P, ctypes.c_float, ctypes.c_float, _P,
                                                  _P, _P, _S, _S, _I, _P, _P]),
    "purlinSessionBegin": (_RES, [_P, _P]),
    "purlinSessionEnd": (_RES, [_P, _P]),
    "purlinGroupStart": (_RES, []),
    "purlinGroupEnd": (_RES, []),
    "purlinMemAlloc": (_RES, [_P, _S, ctypes.POINTER(_P)]),
    "purlinMemFree": (_RES, [_P, _P]),
}

_lock = threading.Lock()
_lib = None
_path = None


def candidates():
    """The paths tried, in order (see the module comment)."""
    env = os.environ.get("PURLIN_LIBRARY")
    if env:
        return [os.path.abspath(env)]
    pkg = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(pkg))
    return [
        os.path.join(pkg, "libpurlin.so"),
        os.path.join(os.path.dirname(pkg), "libpurlin.so"),
        # Bazel runfiles (py_library data): <workspace>/runtime/libpurlin.so.
        os.path.join(repo, "runtime", "libpurlin.so"),
        os.path.join(repo, "bazel-bin", "runtime", "libpurlin.so"),
        os.path.join(repo, ".gpu", "libpurlin.so"),
        "libpurlin.so",  # the dynamic loader's search
    ]


def _load():
    env = os.environ.get("PURLIN_LIBRARY")
    tried = []
    for path in candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append("%s (no such file)" % path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        try:
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
        except AttributeError as e:
            tried.append("%s (not libpurlin: %s)" % (path, e))
            continue
        return lib, (path if os.path.isabs(path) else lib._name)
    where = ("PURLIN_LIBRARY is set, so only it was tried" if env else
             "looked in: " + "; ".join(tried))
    if env:
        where += ": " + "; ".join(tried)
    pkg = os.path.dirname(os.path.abspath(__file__))
    raise LibraryNotFoundError("cannot load libpurlin.so (%s); %s" % (where, BUILD_HINT % pkg))


def lib():
    """The loaded library (loading it on first use)."""
    global _lib, _path
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib, _path = _load()
    return _lib


def library_path():
    """Where the loaded library came from (loading it on first use)."""
    lib()
    return _path


def last_error(handle=None):
    """purlinGetLastError: of a live communicator handle, or of this thread."""
    text = lib().purlinGetLastError(handle)
    return text.decode("utf-8", "replace") if text else ""


def check(code, handle=None):
    """Raises the exception of a failing result code, with the library's
    message: the communicator's when a live handle is given, else this
    thread's (init, groups, invalid handles)."""
    if code != Result.SUCCESS:
        message = last_error(handle)
        if not message:
            text = lib().purlinGetErrorString(code)
            message = text.decode() if text else "result %d" % code
        raise error_for(code, message)
