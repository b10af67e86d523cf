"""purlin: GPU collectives for one NVLink server, from Python.

A pure-Python binding of libpurlin.so through ctypes: nothing to compile,
torch optional. Collectives take torch tensors or any object with
__cuda_array_interface__, follow NCCL's semantics and are capturable in
torch.cuda.graph.

    import purlin, torch
    comm = purlin.init_rank_from_env()           # under torchrun
    x = torch.ones(1024, device="cuda")
    comm.all_reduce(x, out=x)                     # in place, current stream
    comm.destroy()

Where the library is looked for: _library.py (PURLIN_LIBRARY, else next to
the package). Result codes and exceptions: errors.py. Communicators,
collectives, sessions and groups: comm.py.
"""

from ._buffers import DataType, RedOp
from ._library import PURLIN_MAX_RANKS as MAX_RANKS
from ._library import PURLIN_UNIQUE_ID_BYTES as UNIQUE_ID_BYTES
from ._library import library_path
from .comm import (PATH_AUTO, PATH_LATENCY, PATH_THROUGHPUT, Communicator, Communicators,
                   Config, SymmetricBuffer, get_unique_id, group, group_end, group_start,
                   init_all, init_rank, init_rank_from_env, version)
from .errors import (NUM_RESULTS, AbortedError, Error, InProgressError, InternalError,
                     InvalidArgumentError, InvalidUsageError, LibraryNotFoundError,
                     NoDeviceError, OutOfMemoryError, RemoteError, Result, SystemCallError,
                     UnhandledCudaError, WaitTimeoutError)

__version__ = "0.2.0"

# The result codes as module constants, purlin.INVALID_ARGUMENT == 4 etc.
SUCCESS = Result.SUCCESS
UNHANDLED_CUDA_ERROR = Result.UNHANDLED_CUDA_ERROR
SYSTEM_ERROR = Result.SYSTEM_ERROR
INTERNAL_ERROR = Result.INTERNAL_ERROR
INVALID_ARGUMENT = Result.INVALID_ARGUMENT
INVALID_USAGE = Result.INVALID_USAGE
REMOTE_ERROR = Result.REMOTE_ERROR
IN_PROGRESS = Result.IN_PROGRESS
NO_DEVICE = Result.NO_DEVICE
OUT_OF_MEMORY = Result.OUT_OF_MEMORY
TIMEOUT = Result.TIMEOUT
ABORTED = Result.ABORTED

# Datatypes and ops, purlin.BFLOAT16, purlin.SUM, ...
FLOAT32 = DataType.FLOAT32
FLOAT16 = DataType.FLOAT16
BFLOAT16 = DataType.BFLOAT16
FP8_E4M3 = DataType.FP8_E4M3
FP8_E5M2 = DataType.FP8_E5M2
INT32 = DataType.INT32
SUM = RedOp.SUM
MAX = RedOp.MAX
MIN = RedOp.MIN

__all__ = [
    "AbortedError", "Communicator", "Communicators", "Config", "DataType", "Error",
    "InProgressError", "InternalError", "InvalidArgumentError", "InvalidUsageError",
    "LibraryNotFoundError", "NoDeviceError", "OutOfMemoryError", "RedOp", "RemoteError",
    "Result", "SymmetricBuffer", "SystemCallError", "UnhandledCudaError", "WaitTimeoutError",
    "get_unique_id",
    "group", "group_end", "group_start", "init_all", "init_rank", "init_rank_from_env",
    "library_path", "version", "MAX_RANKS", "UNIQUE_ID_BYTES", "NUM_RESULTS", "PATH_AUTO",
    "PATH_LATENCY", "PATH_THROUGHPUT",
]
