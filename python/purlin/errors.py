"""Result codes and exceptions of purlin's Python package.

The codes mirror PURLIN_RESULT_MAP in runtime/purlin.h, written out here so
that nothing is parsed at run time; tests/test_host.py checks every one
against purlinGetErrorName of the loaded library. Every failure of a call
into the library, and every argument the package refuses before calling it,
raises a subclass of `Error` carrying the code and the library's message.
Loading the library lives in _library.py, not here.
"""

import enum

__all__ = [
    "Result",
    "Error",
    "UnhandledCudaError",
    "SystemCallError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "RemoteError",
    "InProgressError",
    "NoDeviceError",
    "OutOfMemoryError",
    "WaitTimeoutError",
    "AbortedError",
    "LibraryNotFoundError",
    "error_for",
]


class Result(enum.IntEnum):
    """purlinResult_t: fixed values, never reused (runtime/purlin.h)."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    NO_DEVICE = 8
    OUT_OF_MEMORY = 9
    TIMEOUT = 10
    ABORTED = 11

    @property
    def c_name(self):
        """The C enumerator, as purlinGetErrorName returns it."""
        return _C_NAMES[self]


# The enumerators' names in purlin.h, in the order of the values above.
_C_NAMES = {
    Result.SUCCESS: "purlinSuccess",
    Result.UNHANDLED_CUDA_ERROR: "purlinUnhandledCudaError",
    Result.SYSTEM_ERROR: "purlinSystemError",
    Result.INTERNAL_ERROR: "purlinInternalError",
    Result.INVALID_ARGUMENT: "purlinInvalidArgument",
    Result.INVALID_USAGE: "purlinInvalidUsage",
    Result.REMOTE_ERROR: "purlinRemoteError",
    Result.IN_PROGRESS: "purlinInProgress",
    Result.NO_DEVICE: "purlinNoDevice",
    Result.OUT_OF_MEMORY: "purlinOutOfMemory",
    Result.TIMEOUT: "purlinTimeout",
    Result.ABORTED: "purlinAborted",
}

# purlinNumResults: the values are 0 .. NUM_RESULTS - 1.
NUM_RESULTS = 12


class Error(Exception):
    """A purlin failure.

    Attributes:
      code     the Result (None only for LibraryNotFoundError, which no C
               call produced)
      name     the C name of the code, e.g. "purlinInvalidArgument"
      message  the detail text: purlinGetLastError for failures of the
               library, or the package's own text for arguments it refused
               before calling the library
    """

    def __init__(self, code, message):
        self.code = None if code is None else Result(code)
        self.name = "LibraryNotFound" if code is None else self.code.c_name
        # The library's messages already start with the code's name.
        if code is not None and not message.startswith(self.name):
            message = "%s: %s" % (self.name, message)
        self.message = message
        super().__init__(message)


class UnhandledCudaError(Error):
    """purlinUnhandledCudaError: a call to the CUDA runtime or driver failed."""


class SystemCallError(Error):
    """purlinSystemError: a system call failed."""


class InternalError(Error):
    """purlinInternalError: internal error in purlin."""


class InvalidArgumentError(Error, ValueError):
    """purlinInvalidArgument: an argument is out of range or of the wrong kind."""


class InvalidUsageError(Error):
    """purlinInvalidUsage: a call that the current state does not allow."""


class RemoteError(Error):
    """purlinRemoteError: a peer rank failed or aborted."""


class InProgressError(Error):
    """purlinInProgress: operation in progress."""


class NoDeviceError(Error):
    """purlinNoDevice: no usable CUDA device or driver."""


class OutOfMemoryError(Error, MemoryError):
    """purlinOutOfMemory: out of device or host memory."""


class WaitTimeoutError(Error, TimeoutError):
    """purlinTimeout: a wait timed out."""


class AbortedError(Error):
    """purlinAborted: the communicator was aborted."""


class LibraryNotFoundError(Error, OSError):
    """libpurlin.so could not be found or loaded; the message says how to build it."""

    def __init__(self, message):
        Error.__init__(self, None, message)


_CLASSES = {
    Result.UNHANDLED_CUDA_ERROR: UnhandledCudaError,
    Result.SYSTEM_ERROR: SystemCallError,
    Result.INTERNAL_ERROR: InternalError,
    Result.INVALID_ARGUMENT: InvalidArgumentError,
    Result.INVALID_USAGE: InvalidUsageError,
    Result.REMOTE_ERROR: RemoteError,
    Result.IN_PROGRESS: InProgressError,
    Result.NO_DEVICE: NoDeviceError,
    Result.OUT_OF_MEMORY: OutOfMemoryError,
    Result.TIMEOUT: WaitTimeoutError,
    Result.ABORTED: AbortedError,
}


def error_for(code, message):
    """The exception for a failing result code (not raised).

    A code outside the enum (a newer library than this package) becomes a
    plain Error carrying INTERNAL_ERROR, with the raw value in the message,
    so that nothing is lost."""
    try:
        result = Result(code)
    except ValueError:
        return InternalError(Result.INTERNAL_ERROR,
                             "result code %d is unknown to this package: %s" % (code, message))
    if result == Result.SUCCESS:
        raise ValueError("error_for(SUCCESS): success is not an error")
    return _CLASSES[result](result, message)
