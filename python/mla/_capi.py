"""ctypes declarations of libMLACAPI.so, the C API in include/mla-c/Runtime.h.

ctypes (rather than a compiled extension module) keeps the package independent of the Python version's
ABI: the same build works with any CPython 3 that has numpy.
"""

import ctypes
import os

MAX_RANK = 8

SUCCESS = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_COMPILE = 2
ERROR_RUNTIME = 3

DTYPE_FLOAT32 = 0
DTYPE_FLOAT16 = 1
DTYPE_INT32 = 2
DTYPE_UINT8 = 3


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
    ]


class CacheFormat(ctypes.Structure):
    _fields_ = [
        ("kvFormat", ctypes.c_char_p),
        ("hasKvScale", ctypes.c_int32),
        ("kvScale", ctypes.c_double),
        ("kvScaleTensor", ctypes.POINTER(Tensor)),
    ]


class DecodeOptions(ctypes.Structure):
    _fields_ = [
        ("headDimV", ctypes.c_int64),
        ("softmaxScale", ctypes.c_double),
        ("causal", ctypes.c_int32),
        ("hasNumSplits", ctypes.c_int32),
        ("numSplits", ctypes.c_int64),
        ("cache", CacheFormat),
    ]


class PrefillOptions(ctypes.Structure):
    _fields_ = [
        ("softmaxScale", ctypes.c_double),
        ("vHeadDim", ctypes.c_int64),
        ("hasWorkspaceRows", ctypes.c_int32),
        ("workspaceRows", ctypes.c_int64),
        ("cache", CacheFormat),
    ]


class AttentionOptions(ctypes.Structure):
    _fields_ = [
        ("prefill", PrefillOptions),
        ("decodeThreshold", ctypes.c_int64),
    ]


class RuntimeStats(ctypes.Structure):
    _fields_ = [
        ("cacheHits", ctypes.c_uint64),
        ("compiles", ctypes.c_uint64),
        ("compileSeconds", ctypes.c_double),
        ("cachedKernels", ctypes.c_uint64),
    ]


def _load():
    # The build copies the library next to the package sources (python/CMakeLists.txt).
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "libMLACAPI.so")
    if not os.path.exists(path):
        raise ImportError(f"mla: {path} is missing; build the package with `make build` "
                          "and import it from build/python_packages")
    return ctypes.CDLL(path)


lib = _load()

_T = ctypes.POINTER(Tensor)
_ERR = [ctypes.c_char_p, ctypes.c_size_t]


def _declare(name, argtypes):
    fn = getattr(lib, name)
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    return fn


mlaDecode = _declare("mlaDecode", [_T, _T, _T, _T, ctypes.POINTER(DecodeOptions), _T, _T] + _ERR)
mlaDecodeVarlen = _declare("mlaDecodeVarlen", [_T, _T, _T, _T, _T, ctypes.POINTER(DecodeOptions), _T, _T] + _ERR)
mlaCacheWrite = _declare("mlaCacheWrite", [_T, _T, _T, _T, ctypes.POINTER(CacheFormat)] + _ERR)
mlaSplitKvBProj = _declare("mlaSplitKvBProj",
                           [_T, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _T, _T] + _ERR)
mlaAbsorbQ = _declare("mlaAbsorbQ", [_T, _T, _T] + _ERR)
mlaUpProjOut = _declare("mlaUpProjOut", [_T, _T, _T] + _ERR)
mlaMergeStates = _declare("mlaMergeStates", [_T, _T, _T, _T, _T, _T] + _ERR)
mlaGatherCache = _declare("mlaGatherCache",
                          [_T] * 5 + [ctypes.c_int64, ctypes.POINTER(CacheFormat)] + _ERR)
mlaUpProjKv = _declare("mlaUpProjKv",
                       [_T, _T, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _T, _T] + _ERR)
mlaMha = _declare("mlaMha", [_T] * 5 + [ctypes.c_double, ctypes.c_int32, _T, _T] + _ERR)
mlaPrefill = _declare("mlaPrefill", [_T] * 8 + [ctypes.POINTER(PrefillOptions), _T] + _ERR)
mlaAttention = _declare("mlaAttention", [_T] * 8 + [ctypes.POINTER(AttentionOptions), _T] + _ERR)

# mla-c/GpuJit.h: the GPU kernel compiler this library links (mla.gpu_jit).
mlaCompileGpuKernel = _declare("mlaCompileGpuKernel",
                               [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32),
                                ctypes.c_char_p, ctypes.c_size_t] + _ERR)

lib.mlaGetRuntimeStats.argtypes = [ctypes.POINTER(RuntimeStats)]
lib.mlaGetRuntimeStats.restype = None
lib.mlaClearKernelCache.argtypes = []
lib.mlaClearKernelCache.restype = None
lib.mlaGetVersion.argtypes = []
lib.mlaGetVersion.restype = ctypes.c_char_p
