"""Host tests of the purlin package: no GPU, no torch needed.

They load the real libpurlin.so (PURLIN_LIBRARY, else where the package
looks), check every result code against the library's own names, drive the
library into the errors it can report without a GPU, and check every
argument rule of the collectives with duck-typed tensors (classes with
__cuda_array_interface__) on a communicator whose handle is NULL: a call
that passes the package's checks reaches the library, which names the C
function it entered when it refuses the NULL handle, and a recording proxy
shows the exact arguments passed. A missing library and a machine without a
GPU are checked in subprocesses. GPU behaviour is tests/test_gpu.py's.

    PURLIN_LIBRARY=/path/to/libpurlin.so python3 python/tests/test_host.py
"""

import ctypes
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import purlin  # noqa: E402
from purlin import _buffers, _library  # noqa: E402
from purlin.errors import error_for  # noqa: E402


class Fake:
    """A duck-typed CUDA array: __cuda_array_interface__ and, optionally,
    a device attribute and a dtype name (for types without a typestr)."""

    def __init__(self, shape, typestr="<f4", ptr=0x7F0000001000, device=0, strides=None,
                 readonly=False, dtype=None, stream=None, mask=None):
        if isinstance(shape, int):
            shape = (shape,)
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly),
            "strides": strides, "version": 3, "stream": stream, "mask": mask,
        }
        if device is not None:
            self.device = device
        if dtype is not None:
            self.dtype = dtype


class Name:
    """A dtype-like object with a .name (as ml_dtypes and torch dtypes have)."""

    def __init__(self, name):
        self.name = name


class Recorder:
    """Stands in for the loaded library: records each collective's
    arguments (V counts read while the call's array is alive), then calls
    the real function so the library still refuses the NULL handle."""

    COLLECTIVES = ("purlinAllReduce", "purlinAllGather", "purlinReduceScatter",
                   "purlinAllToAll", "purlinAllGatherV", "purlinReduceScatterV",
                   "purlinAllToAllV", "purlinAllReduceResidualRMSNorm",
                   "purlinAllReduceResidualRMSNormFp8", "purlinSessionBegin", "purlinSessionEnd")

    def __init__(self, real, nvalues=0):
        self.real, self.calls, self.nvalues = real, [], nvalues

    def __getattr__(self, name):
        fn = getattr(self.real, name)
        if name not in self.COLLECTIVES:
            return fn

        def record(*args):
            args = list(args)
            if name.endswith("V") and self.nvalues:
                ptr = args[2]
                args[2] = list((ctypes.c_size_t * self.nvalues).from_address(ptr))
            self.calls.append((name, tuple(args)))
            return fn(*[a if not isinstance(a, list) else None for a in args])
        return record


def run_python(code, **env):
    """Runs `code` in a fresh interpreter with `env` added; (rc, out, err)."""
    full = dict(os.environ)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    full["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + full.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def c_name(code):
    return _library.lib().purlinGetErrorName(code).decode()


class LibraryTest(unittest.TestCase):
    def test_loads_and_reports_version(self):
        path = purlin.library_path()
        self.assertTrue(os.path.exists(path), path)
        # PURLIN_VERSION_CODE: major * 10000 + minor * 100 + patch.
        major, minor, patch = (int(x) for x in purlin.__version__.split("."))
        self.assertEqual(purlin.version(), major * 10000 + minor * 100 + patch)

    def test_every_declared_function_is_exported(self):
        lib = _library.lib()
        for name in _library._PROTOTYPES:
            self.assertTrue(hasattr(lib, name), name)

    def test_config_struct_matches_purlin_h(self):
        # config.c asserts sizeof == 2 * size_t + 6 * int + 2 * size_t
        # (windowBytes last).
        S = _library.ConfigStruct
        self.assertEqual(ctypes.sizeof(S), 4 * ctypes.sizeof(ctypes.c_size_t) +
                         6 * ctypes.sizeof(ctypes.c_int))
        self.assertEqual(S.windowBytes.offset, ctypes.sizeof(S) - ctypes.sizeof(ctypes.c_size_t))
        self.assertEqual(ctypes.sizeof(_library.UniqueIdStruct), 128)

    def test_config_fields_reach_the_library(self):
        # Each field out of range is refused by the library by its C name,
        # so every field lands where purlin.h has it.
        cases = {"megakernel_ctas": (-1, "megakernelCtas"), "timeout_ms": (0, "timeoutMs"),
                 "latency_buffer_bytes": (1, "latencyBufferBytes"),
                 "throughput_buffer_bytes": (1, "throughputBufferBytes"),
                 "path": (7, "config->path"), "collective_ctas": (-1, "collectiveCtas"),
                 "window_bytes": (1 << 50, "windowBytes")}
        for field, (value, cname) in cases.items():
            with self.subTest(field=field):
                with self.assertRaises(purlin.InvalidArgumentError) as cm:
                    purlin.init_all([0], **{field: value})
                self.assertIn(cname, cm.exception.message)
                self.assertIn("config.c", cm.exception.message)
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            purlin.init_all([0], no_such_field=1)
        self.assertIn("no_such_field", str(cm.exception))

    def test_default_config_passes_the_library_checks(self):
        # The defaults are PURLIN_CONFIG_INITIALIZER's: the library accepts
        # them and fails (if it fails) only on the missing GPU.
        try:
            comms = purlin.init_all([0], config=purlin.Config())
        except purlin.NoDeviceError:
            return
        comms.destroy()


class ResultCodeTest(unittest.TestCase):
    CLASSES = {
        purlin.UNHANDLED_CUDA_ERROR: purlin.UnhandledCudaError,
        purlin.SYSTEM_ERROR: purlin.SystemCallError,
        purlin.INTERNAL_ERROR: purlin.InternalError,
        purlin.INVALID_ARGUMENT: purlin.InvalidArgumentError,
        purlin.INVALID_USAGE: purlin.InvalidUsageError,
        purlin.REMOTE_ERROR: purlin.RemoteError,
        purlin.IN_PROGRESS: purlin.InProgressError,
        purlin.NO_DEVICE: purlin.NoDeviceError,
        purlin.OUT_OF_MEMORY: purlin.OutOfMemoryError,
        purlin.TIMEOUT: purlin.WaitTimeoutError,
        purlin.ABORTED: purlin.AbortedError,
    }

    def test_codes_match_the_library(self):
        self.assertEqual(len(purlin.Result), purlin.NUM_RESULTS)
        for r in purlin.Result:
            self.assertEqual(c_name(int(r)), r.c_name, r)
        # One past the last mirrored code is unknown to the library too, so
        # the library has no code this package lacks.
        self.assertEqual(c_name(purlin.NUM_RESULTS), "purlinUnknownResult")
        self.assertEqual(sorted(int(r) for r in purlin.Result), list(range(purlin.NUM_RESULTS)))

    def test_module_constants(self):
        for r in purlin.Result:
            self.assertEqual(getattr(purlin, r.name), r)
            self.assertEqual(int(getattr(purlin, r.name)), r.value)

    def test_every_failing_code_maps_to_its_exception(self):
        self.assertEqual(set(self.CLASSES), set(purlin.Result) - {purlin.SUCCESS})
        for code, cls in self.CLASSES.items():
            with self.subTest(code=code):
                e = error_for(int(code), "detail text %d" % code)
                self.assertIs(type(e), cls)
                self.assertIsInstance(e, purlin.Error)
                self.assertEqual(e.code, code)
                self.assertEqual(e.name, c_name(int(code)))
                self.assertIn("detail text %d" % code, str(e))
                self.assertTrue(str(e).startswith(e.name + ": "), str(e))

    def test_check_raises_with_the_library_message(self):
        for code, cls in self.CLASSES.items():
            with self.subTest(code=code):
                purlin.version()  # a successful call clears the thread's message
                with self.assertRaises(cls) as cm:
                    _library.check(int(code))
                expected = _library.lib().purlinGetErrorString(int(code)).decode()
                self.assertIn(expected, cm.exception.message)
                self.assertEqual(cm.exception.code, code)
        _library.check(0)  # success raises nothing

    def test_python_exception_bases(self):
        self.assertTrue(issubclass(purlin.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(purlin.WaitTimeoutError, TimeoutError))
        self.assertTrue(issubclass(purlin.OutOfMemoryError, MemoryError))
        self.assertTrue(issubclass(purlin.LibraryNotFoundError, OSError))

    def test_unknown_code_keeps_its_value(self):
        e = error_for(99, "from a newer library")
        self.assertIsInstance(e, purlin.Error)
        self.assertIn("99", str(e))
        self.assertIn("from a newer library", str(e))


class LibraryErrorsTest(unittest.TestCase):
    """Errors the library itself reports on a machine without a GPU (and
    with one: none of these get as far as the GPU)."""

    def test_init_all_arguments(self):
        with self.assertRaises(purlin.InvalidArgumentError):
            purlin.init_all([])
        with self.assertRaises(purlin.InvalidArgumentError):
            purlin.init_all(purlin.MAX_RANKS + 1)
        with self.assertRaises(purlin.InvalidArgumentError):
            purlin.init_all(["gpu0"])
        with self.assertRaises(purlin.InvalidArgumentError):
            purlin.init_all(None)

    def test_unique_id(self):
        a, b = purlin.get_unique_id(), purlin.get_unique_id()
        self.assertIsInstance(a, bytes)
        self.assertEqual(len(a), purlin.UNIQUE_ID_BYTES)
        self.assertNotEqual(a, b)

    def test_init_rank_refuses_a_forged_id(self):
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            purlin.init_rank(1, 0, bytes(purlin.UNIQUE_ID_BYTES))
        self.assertIn("unique id", cm.exception.message)
        self.assertIn("bootstrap.c", cm.exception.message)

    def test_init_rank_arguments(self):
        uid = purlin.get_unique_id()
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            purlin.init_rank(2, 5, uid)
        self.assertIn("rank is 5", cm.exception.message)
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            purlin.init_rank(0, 0, uid)
        self.assertIn("nranks is 0", cm.exception.message)
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            purlin.init_rank(2, 0, uid[:100])
        self.assertIn("100 bytes", cm.exception.message)
        with self.assertRaises(purlin.InvalidArgumentError):
            purlin.init_rank(2, 0, 12345)

    def test_unique_id_as_tensor_like(self):
        class Bytes:  # what a uint8 tensor offers: reshape and tolist
            def __init__(self, raw):
                self.raw = raw

            def reshape(self, *shape):
                return self

            def tolist(self):
                return list(self.raw)

        uid = purlin.get_unique_id()
        # Forged contents in the right shape reach the library's id check.
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            purlin.init_rank(1, 0, Bytes(bytes(128)))
        self.assertIn("unique id", cm.exception.message)
        self.assertEqual(purlin.comm._unique_id_bytes(Bytes(uid), "t"), uid)

    def test_init_rank_from_env_without_launcher(self):
        names = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "SLURM_PROCID", "SLURM_NTASKS")
        saved = {k: os.environ.pop(k) for k in names if k in os.environ}
        try:
            with self.assertRaises(purlin.InvalidUsageError) as cm:
                purlin.init_rank_from_env()
            self.assertIn("no launcher found", cm.exception.message)
            self.assertIn("WORLD_SIZE", cm.exception.message)
        finally:
            os.environ.update(saved)

    def test_group_end_without_start(self):
        with self.assertRaises(purlin.InvalidUsageError) as cm:
            purlin.group_end()
        self.assertIn("no group is open", cm.exception.message)
        with purlin.group():
            with purlin.group():  # groups nest
                pass
        with self.assertRaises(purlin.InvalidUsageError):
            purlin.group_end()


class NoGpuTest(unittest.TestCase):
    def test_no_gpu_is_a_clean_error(self):
        # CUDA_VISIBLE_DEVICES="" hides every GPU, so this holds on a GPU
        # machine as well; the process must exit normally, not crash.
        code = ("import purlin\n"
                "try:\n"
                "    purlin.init_all([0])\n"
                "except purlin.NoDeviceError as e:\n"
                "    print('NoDeviceError', e.code, e.name)\n"
                "    print(e.message)\n")
        rc, out, err = run_python(code, CUDA_VISIBLE_DEVICES="")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0], "NoDeviceError 8 purlinNoDevice", out + err)
        self.assertTrue(lines[1].startswith("purlinNoDevice: "), lines[1])

    def test_no_gpu_here(self):
        try:
            comms = purlin.init_all([0])
        except purlin.NoDeviceError as e:
            self.assertEqual(e.code, purlin.NO_DEVICE)
            self.assertTrue(e.message.startswith("purlinNoDevice: "), e.message)
            self.assertTrue("cudaGetDeviceCount" in e.message or "no CUDA device" in e.message,
                            e.message)
            return
        comms.destroy()
        self.skipTest("this machine has a GPU (checked with CUDA_VISIBLE_DEVICES='' above)")


class MissingLibraryTest(unittest.TestCase):
    CODE = ("import purlin\n"
            "print(purlin.MAX_RANKS)\n"  # the package imports without the library
            "try:\n"
            "    purlin.version()\n"
            "except purlin.LibraryNotFoundError as e:\n"
            "    print(type(e).__name__, e.code)\n"
            "    print(e.message)\n")

    def test_missing_file(self):
        rc, out, err = run_python(self.CODE, PURLIN_LIBRARY="/nonexistent/dir/libpurlin.so")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[:2], ["32", "LibraryNotFoundError None"], out)
        self.assertIn("/nonexistent/dir/libpurlin.so", lines[2])
        self.assertIn("no such file", lines[2])
        self.assertIn("bazel build //runtime:libpurlin.so", lines[2])
        self.assertIn("PURLIN_LIBRARY", lines[2])

    def test_not_a_library(self):
        rc, out, err = run_python(self.CODE, PURLIN_LIBRARY=os.path.abspath(__file__))
        self.assertEqual(rc, 0, err)
        self.assertIn("LibraryNotFoundError", out)
        self.assertIn("bazel build //runtime:libpurlin.so", out)

    def test_another_library(self):
        libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6",
                                 "/lib64/libc.so.6") if os.path.exists(p)), None)
        if libc is None:
            self.skipTest("no libc.so.6 at a known path")
        rc, out, err = run_python(self.CODE, PURLIN_LIBRARY=libc)
        self.assertEqual(rc, 0, err)
        self.assertIn("not libpurlin", out)


class ArgumentTest(unittest.TestCase):
    """The collectives' checks on a 2-rank communicator (this is rank 1, on
    cuda:0) whose handle is NULL."""

    def setUp(self):
        self.comm = purlin.Communicator._unbound(nranks=2, rank=1, device=0)
        self.real = _library.lib()
        self.saved_torch = _buffers._torch

    def tearDown(self):
        _library._lib = self.real
        _buffers._torch = self.saved_torch

    def refused(self, fn, *args, expect="", **kwargs):
        """The package refuses the call before the library sees it."""
        rec = Recorder(self.real)
        _library._lib = rec
        try:
            with self.assertRaises(purlin.InvalidArgumentError) as cm:
                fn(*args, **kwargs)
        finally:
            _library._lib = self.real
        self.assertEqual(rec.calls, [], "reached the library: %s" % cm.exception)
        self.assertIn(expect, cm.exception.message)
        self.assertNotIn("comm is NULL", cm.exception.message)
        return cm.exception

    def reaches(self, fn, *args, cname, nvalues=0, **kwargs):
        """The call passes the package's checks and enters `cname`, which
        refuses the NULL handle; returns the arguments it was given."""
        rec = Recorder(self.real, nvalues)
        _library._lib = rec
        try:
            with self.assertRaises(purlin.InvalidArgumentError) as cm:
                fn(*args, **kwargs)
        finally:
            _library._lib = self.real
        self.assertIn("%s: comm is NULL" % cname, cm.exception.message)
        self.assertEqual(len(rec.calls), 1)
        self.assertEqual(rec.calls[0][0], cname)
        return rec.calls[0][1]

    # --- what passes, and what is passed --------------------------------

    def test_all_reduce_arguments(self):
        x, y = Fake(10, ptr=0x1000), Fake((2, 5), ptr=0x2000)
        args = self.reaches(self.comm.all_reduce, x, out=y, op="max", stream=7,
                            cname="purlinAllReduce")
        self.assertEqual(args, (0x1000, 0x2000, 10, purlin.FLOAT32, purlin.MAX, None, 7))
        args = self.reaches(self.comm.all_reduce, x, out=x, op=purlin.MIN, stream=0,
                            cname="purlinAllReduce")
        self.assertEqual(args[:5], (0x1000, 0x1000, 10, purlin.FLOAT32, purlin.MIN))

    def test_all_reduce_residual_rmsnorm_arguments(self):
        c = self.comm
        x, r, w = Fake(12, "<f2", ptr=0x100), Fake((3, 4), "<f2", ptr=0x200), Fake(4, "<f2",
                                                                                  ptr=0x300)
        o, ro = Fake(12, "<f2", ptr=0x400), Fake(12, "<f2", ptr=0x500)
        args = self.reaches(c.all_reduce_residual_rmsnorm, x, r, w, 1e-5, out=o,
                            residual_out=ro, stream=3, cname="purlinAllReduceResidualRMSNorm")
        self.assertEqual(args[:3], (0x100, 0x200, 0x300))
        self.assertAlmostEqual(args[3], 1e-5)
        self.assertEqual(args[4:], (0x400, 0x500, 12, 4, purlin.FLOAT16, None, 3))
        q = Fake(12, "|V1", ptr=0x600, dtype=Name("float8_e4m3fn"))
        args = self.reaches(c.all_reduce_residual_rmsnorm, x, r, w, 0.0, out=x, residual_out=r,
                            out_fp8=q, scale=2.0, stream=0,
                            cname="purlinAllReduceResidualRMSNormFp8")
        self.assertEqual(args[4:], (2.0, 0x100, 0x200, 0x600, 12, 4, purlin.FLOAT16, None, 0))
        self.refused(c.all_reduce_residual_rmsnorm, x, r, Fake(5, "<f2"), 1e-5, out=o,
                     residual_out=ro, expect="not whole rows")
        self.refused(c.all_reduce_residual_rmsnorm, x, Fake(12), w, 1e-5, out=o,
                     residual_out=ro, expect="residual is float32")
        self.refused(c.all_reduce_residual_rmsnorm, x, Fake(8, "<f2"), w, 1e-5, out=o,
                     residual_out=ro, expect="residual has 8 elements")
        self.refused(c.all_reduce_residual_rmsnorm, x, r, w, 1e-5, out=o,
                     residual_out=Fake(8, "<f2"), expect="residual_out has 8 elements")
        self.refused(c.all_reduce_residual_rmsnorm, x, r, w, 1e-5, out=o, residual_out=ro,
                     out_fp8=Fake(12, "<f2"), expect="out_fp8 must be")

    def test_uniform_collectives_arguments(self):
        c = self.comm
        args = self.reaches(c.all_gather, Fake(3, ptr=0x10), out=Fake(6, ptr=0x20), stream=1,
                            cname="purlinAllGather")
        self.assertEqual(args, (0x10, 0x20, 3, purlin.FLOAT32, None, 1))
        args = self.reaches(c.reduce_scatter, Fake(8, "<i4", ptr=0x10), out=Fake(4, "<i4"),
                            op="sum", stream=0, cname="purlinReduceScatter")
        self.assertEqual(args[2:5], (4, purlin.INT32, purlin.SUM))
        args = self.reaches(c.all_to_all, Fake(8, "<f2"), out=Fake(8, "<f2"), stream=0,
                            cname="purlinAllToAll")
        self.assertEqual(args[2:4], (4, purlin.FLOAT16))

    def test_v_collectives_host_counts(self):
        c = self.comm
        args = self.reaches(c.all_gather_v, Fake(5), [3, 5], out=Fake(8), stream=0,
                            cname="purlinAllGatherV", nvalues=2)
        self.assertEqual(args[2:4], ([3, 5], purlin.FLOAT32))
        args = self.reaches(c.reduce_scatter_v, Fake(9), (4, 5), out=Fake(5), op="min",
                            stream=0, cname="purlinReduceScatterV", nvalues=2)
        self.assertEqual(args[2:5], ([4, 5], purlin.FLOAT32, purlin.MIN))
        # Rank 1 sends row 1 (2 + 6) and receives column 1 (4 + 6).
        args = self.reaches(c.all_to_all_v, Fake(8), [[1, 4], [2, 6]], out=Fake(10), stream=0,
                            cname="purlinAllToAllV", nvalues=4)
        self.assertEqual(args[2], [1, 4, 2, 6])
        self.reaches(c.all_to_all_v, Fake(8), [1, 4, 2, 6], out=Fake(10), stream=0,
                     cname="purlinAllToAllV")

    def test_v_collectives_device_counts(self):
        c = self.comm
        counts = Fake(2, "<i8", ptr=0xC0)
        args = self.reaches(c.all_gather_v, Fake(5), counts, out=Fake(100), stream=0,
                            cname="purlinAllGatherV")
        self.assertEqual(args[2], 0xC0)  # the device pointer itself
        self.reaches(c.reduce_scatter_v, Fake(5), counts, out=Fake(3), stream=0,
                     cname="purlinReduceScatterV")
        matrix = Fake((2, 2), "<u8", ptr=0xD0)
        args = self.reaches(c.all_to_all_v, Fake(5), matrix, out=Fake(7), stream=0,
                            cname="purlinAllToAllV")
        self.assertEqual(args[2], 0xD0)

    def test_datatypes(self):
        c = self.comm
        for typestr, dtype, expected in (
                ("<f4", None, purlin.FLOAT32), ("<f2", None, purlin.FLOAT16),
                ("<i4", None, purlin.INT32), ("<V2", Name("bfloat16"), purlin.BFLOAT16),
                ("|V1", Name("float8_e4m3fn"), purlin.FP8_E4M3),
                ("|V1", "torch.float8_e5m2", purlin.FP8_E5M2)):
            with self.subTest(typestr=typestr, dtype=dtype):
                x = Fake(4, typestr, dtype=dtype)
                args = self.reaches(c.all_reduce, x, out=x, stream=0, cname="purlinAllReduce")
                self.assertEqual(args[3], expected)
        # Enum values are purlin.h's.
        self.assertEqual([int(d) for d in purlin.DataType], [0, 1, 2, 3, 4, 5])
        self.assertEqual([int(o) for o in purlin.RedOp], [0, 1, 2])

    def test_ops(self):
        class TorchLikeOp:
            name = "MAX"
        x = Fake(4)
        for op, expected in (("sum", 0), ("MAX", 1), ("Min", 2), (purlin.MAX, 1), (2, 2),
                             (TorchLikeOp(), 1)):
            args = self.reaches(self.comm.all_reduce, x, out=x, op=op, stream=0,
                                cname="purlinAllReduce")
            self.assertEqual(args[4], expected, op)
        for op in ("avg", 3, None, "prod"):
            self.refused(self.comm.all_reduce, x, out=x, op=op, stream=0, expect="op")

    def test_streams(self):
        class TorchLikeStream:
            cuda_stream = 0x5000

        class CupyLikeStream:
            ptr = 0x6000

        class NumbaLikeStream:
            handle = ctypes.c_void_p(0x7000)
        x = Fake(4)
        for stream, expected in ((0, 0), (0x1234, 0x1234), (TorchLikeStream(), 0x5000),
                                 (CupyLikeStream(), 0x6000), (NumbaLikeStream(), 0x7000)):
            args = self.reaches(self.comm.all_reduce, x, out=x, stream=stream,
                                cname="purlinAllReduce")
            self.assertEqual(args[-1], expected)
        for bad in ("stream", 1.5, True, object()):
            self.refused(self.comm.all_reduce, x, out=x, stream=bad, expect="stream")

    def test_default_stream_without_torch(self):
        _buffers._torch = None
        b = _buffers.as_buffer(Fake(4, stream=0x4242), "t", "input")
        self.assertEqual(_buffers.stream_handle(None, 0, b, "t"), 0x4242)
        b = _buffers.as_buffer(Fake(4), "t", "input")
        self.assertEqual(_buffers.stream_handle(None, 0, b, "t"), 0)
        args = self.reaches(self.comm.all_reduce, Fake(4, stream=2), out=Fake(4),
                            cname="purlinAllReduce")
        self.assertEqual(args[-1], 2)  # cudaStreamPerThread, as the producer said

    def test_contiguous_strides_pass(self):
        # Explicit C-contiguous strides, and any stride on extent-1 dims.
        x = Fake((2, 3), strides=(12, 4))
        self.reaches(self.comm.all_reduce, x, out=x, stream=0, cname="purlinAllReduce")
        y = Fake((2, 1, 3), strides=(12, 999, 4))
        self.reaches(self.comm.all_reduce, y, out=y, stream=0, cname="purlinAllReduce")

    def test_zero_elements(self):
        x = Fake(0, ptr=0)
        args = self.reaches(self.comm.all_reduce, x, out=x, stream=0, cname="purlinAllReduce")
        self.assertEqual(args[2], 0)

    def test_device_objects(self):
        class TorchLikeDevice:
            type, index = "cuda", 0

        class CupyLikeDevice:
            id = 0
        for dev in (0, "cuda:0", TorchLikeDevice(), CupyLikeDevice(), None):
            x = Fake(4, device=dev)
            self.reaches(self.comm.all_reduce, x, out=x, stream=0, cname="purlinAllReduce")

    # --- what is refused ---------------------------------------------------

    def test_refuses_non_contiguous(self):
        x = Fake((2, 3), strides=(4, 8))
        e = self.refused(self.comm.all_reduce, x, out=Fake(6), stream=0, expect="contiguous")
        self.assertIn("input", e.message)
        self.refused(self.comm.all_reduce, Fake(6), out=Fake((3, 2), strides=(4, 12)),
                     stream=0, expect="out is not contiguous")

    def test_refuses_wrong_device(self):
        class TorchLikeDevice:
            type, index = "cuda", 3
        self.refused(self.comm.all_reduce, Fake(4, device=1), out=Fake(4), stream=0,
                     expect="input is on cuda:1 but this rank runs on cuda:0")
        self.refused(self.comm.all_reduce, Fake(4), out=Fake(4, device="cuda:2"), stream=0,
                     expect="out is on cuda:2")
        self.refused(self.comm.all_gather, Fake(4), out=Fake(8, device=TorchLikeDevice()),
                     stream=0, expect="out is on cuda:3")
        self.refused(self.comm.all_reduce, Fake(4, device="cpu"), out=Fake(4), stream=0,
                     expect="host memory")

    def test_refuses_unsupported_datatypes(self):
        for typestr, dtype in (("<f8", None), ("<i8", None), ("|u1", None), ("|b1", None),
                               ("<V2", None), ("<V2", Name("float8_e4m3fn")),
                               ("|V1", Name("int8"))):
            with self.subTest(typestr=typestr, dtype=dtype):
                x = Fake(4, typestr, dtype=dtype)
                self.refused(self.comm.all_reduce, x, out=x, stream=0, expect="datatype")

    def test_refuses_mismatched_out(self):
        c = self.comm
        self.refused(c.all_reduce, Fake(4), out=Fake(4, "<f2"), stream=0,
                     expect="out is float16 but input is float32")
        self.refused(c.all_reduce, Fake(4), out=Fake(5), stream=0, expect="expected 4")
        self.refused(c.all_gather, Fake(4), out=Fake(4), stream=0, expect="expected 8")
        self.refused(c.reduce_scatter, Fake(8), out=Fake(8), stream=0, expect="expected 4")
        self.refused(c.all_to_all, Fake(8), out=Fake(6), stream=0, expect="expected 8")
        self.refused(c.all_reduce, Fake(4), out=Fake(4, readonly=True), stream=0,
                     expect="read-only")

    def test_refuses_indivisible_sizes(self):
        self.refused(self.comm.reduce_scatter, Fake(7), out=Fake(3), stream=0,
                     expect="not a multiple of the 2 ranks")
        self.refused(self.comm.all_to_all, Fake(5), out=Fake(5), stream=0,
                     expect="not a multiple")

    def test_refuses_bad_v_counts(self):
        c = self.comm
        self.refused(c.all_gather_v, Fake(5), [5], out=Fake(5), stream=0,
                     expect="1 values, expected 2")
        self.refused(c.all_gather_v, Fake(5), [1, -5], out=Fake(5), stream=0,
                     expect="non-negative")
        self.refused(c.all_gather_v, Fake(5), [1, "5"], out=Fake(6), stream=0, expect="counts[1]")
        self.refused(c.all_gather_v, Fake(5), [1, 2.5], out=Fake(6), stream=0, expect="counts[1]")
        self.refused(c.all_gather_v, Fake(5), 7, out=Fake(6), stream=0, expect="sequence")
        self.refused(c.all_gather_v, Fake(4), [1, 5], out=Fake(6), stream=0,
                     expect="input has 4 elements but counts[1] is 5")
        self.refused(c.all_gather_v, Fake(5), [1, 5], out=Fake(5), stream=0, expect="expected 6")
        self.refused(c.reduce_scatter_v, Fake(5), [1, 5], out=Fake(5), stream=0,
                     expect="add up to 6")
        self.refused(c.reduce_scatter_v, Fake(6), [1, 5], out=Fake(1), stream=0,
                     expect="expected 5")
        self.refused(c.all_to_all_v, Fake(5), [[1, 4], [2, 6]], out=Fake(10), stream=0,
                     expect="row 1 of counts adds up to 8")
        self.refused(c.all_to_all_v, Fake(8), [[1, 4], [2, 6]], out=Fake(8), stream=0,
                     expect="expected 10")
        self.refused(c.all_to_all_v, Fake(8), [1, 4, 2], out=Fake(10), stream=0,
                     expect="expected 4")

    def test_refuses_bad_device_counts(self):
        c = self.comm
        self.refused(c.all_gather_v, Fake(5), Fake(2, "<i4"), out=Fake(6), stream=0,
                     expect="int64")
        self.refused(c.all_gather_v, Fake(5), Fake(3, "<i8"), out=Fake(6), stream=0,
                     expect="3 elements, expected 2")
        self.refused(c.all_gather_v, Fake(5), Fake(2, "<i8", device=1), out=Fake(6), stream=0,
                     expect="counts is on cuda:1")
        self.refused(c.all_gather_v, Fake(5), Fake(2, "<i8"), stream=0, expect="out= is required")
        self.refused(c.all_to_all_v, Fake(5), Fake(2, "<i8"), out=Fake(6), stream=0,
                     expect="expected 4")
        self.refused(c.reduce_scatter_v, Fake(5), Fake(2, "<i8"), out=Fake(6, "<f2"), stream=0,
                     expect="must match")

    def test_refuses_non_arrays(self):
        self.refused(self.comm.all_reduce, [1.0, 2.0], out=Fake(2), stream=0,
                     expect="neither a torch tensor")
        self.refused(self.comm.all_reduce, Fake(4, mask=Fake(4)), out=Fake(4), stream=0,
                     expect="masked")

        class Broken:
            __cuda_array_interface__ = {"shape": (4,)}
        self.refused(self.comm.all_reduce, Broken(), out=Fake(4), stream=0, expect="lacks")

    def test_out_required_without_torch(self):
        _buffers._torch = None
        for call in (lambda: self.comm.all_reduce(Fake(4), stream=0),
                     lambda: self.comm.all_gather(Fake(4), stream=0),
                     lambda: self.comm.reduce_scatter(Fake(4), stream=0),
                     lambda: self.comm.all_to_all(Fake(4), stream=0),
                     lambda: self.comm.all_gather_v(Fake(4), [1, 4], stream=0),
                     lambda: self.comm.reduce_scatter_v(Fake(4), [1, 3], stream=0),
                     lambda: self.comm.all_to_all_v(Fake(4), [1, 1, 1, 3], stream=0)):
            self.refused(call, expect="out= is required without torch")

    # --- lifetime, sessions ------------------------------------------------

    def test_mem_alloc_arguments(self):
        comm = purlin.Communicator._unbound(2, 0, 0)
        for bad in (0, -1, 1.5, True, "8"):
            with self.assertRaises(purlin.InvalidArgumentError) as cm:
                comm.mem_alloc(bad)
            self.assertIn("nbytes must be a positive int", cm.exception.message)
        comm.destroy()
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            comm.mem_alloc(1024)
        self.assertIn("already destroyed", cm.exception.message)

    def test_released_communicator(self):
        comm = purlin.Communicator._unbound(2, 0, 0)
        with comm:  # destroy of NULL is the library's no-op
            self.assertTrue(comm.live)
        self.assertFalse(comm.live)
        for call in (comm.destroy, comm.abort, comm.get_async_error,
                     lambda: comm.all_reduce(Fake(4), out=Fake(4), stream=0),
                     lambda: comm.session_begin(0), lambda: comm.handle):
            with self.assertRaises(purlin.InvalidArgumentError) as cm:
                call()
            self.assertIn("already destroyed", cm.exception.message)
        comm = purlin.Communicator._unbound(2, 0, 0)
        comm.abort()
        self.assertFalse(comm.live)
        group = purlin.Communicators([purlin.Communicator._unbound(2, r, 0) for r in (0, 1)])
        with group:
            pass
        self.assertEqual([c.live for c in group], [False, False])

    def test_async_error_and_sessions_reach_the_library(self):
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            self.comm.get_async_error()
        self.assertIn("purlinCommGetAsyncError: comm is NULL", cm.exception.message)
        args = self.reaches(lambda: self.comm.session_begin(0x99), cname="purlinSessionBegin")
        self.assertEqual(args, (None, 0x99))
        self.reaches(lambda: self.comm.session_end(0), cname="purlinSessionEnd")
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            with self.comm.session(stream=0):
                self.fail("the session body ran although the session did not begin")
        self.assertIn("purlinSessionBegin", cm.exception.message)

    def test_repr(self):
        self.assertEqual(repr(self.comm), "<purlin.Communicator rank 1 of 2 on cuda:0>")


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2 if "-v" in sys.argv else 1).run(suite)
    failed = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print("test_host: %d passed, %d failed, %d skipped (library %s)" % (
        passed, failed, skipped, _library._path))
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
