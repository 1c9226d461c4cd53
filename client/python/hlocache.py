"""hlocache for Python training processes: a shared compilation cache for HLO modules.

Uses only the standard library (ctypes) over libhlocache.so (client/hlocache_c.h):

    import hlocache
    hlocache.initialize_cache("/var/cache/hlo,http://cache.internal:7070")
    exe = hlocache.compile(hlo_text)          # from the cache, or compiled once for the fleet
    print(exe.key, exe.source)
    outputs = exe.run(x_bytes, y_array)       # any buffers: bytes, bytearray, memoryview, array

The library is found through $HLOCACHE_LIBRARY, then next to this file's build tree
(build/libhlocache.so), then the system's library path.
"""

import ctypes
import os

__all__ = ["initialize_cache", "key", "compile", "Executable", "HlocacheError"]


class HlocacheError(RuntimeError):
    """A failure with hlocache's one-line reason."""


def _load():
    candidates = []
    if os.environ.get("HLOCACHE_LIBRARY"):
        candidates.append(os.environ["HLOCACHE_LIBRARY"])
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "libhlocache.so"))
    candidates.append("libhlocache.so")
    errors = []
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise HlocacheError("cannot load libhlocache.so (" + "; ".join(errors) + ")")


_lib = _load()
_c_char_p = ctypes.c_char_p
_size_t = ctypes.c_size_t
_lib.hlocache_initialize_cache.argtypes = [_c_char_p, ctypes.c_int, _c_char_p, _size_t]
_lib.hlocache_key.argtypes = [_c_char_p, _size_t, _c_char_p, _c_char_p, _c_char_p, _size_t]
_lib.hlocache_compile.argtypes = [_c_char_p, _size_t, _c_char_p, _c_char_p, _size_t]
_lib.hlocache_compile.restype = ctypes.c_void_p
_lib.hlocache_executable_free.argtypes = [ctypes.c_void_p]
for _name in ("key", "source"):
    getattr(_lib, f"hlocache_executable_{_name}").argtypes = [ctypes.c_void_p]
    getattr(_lib, f"hlocache_executable_{_name}").restype = _c_char_p
_lib.hlocache_executable_seconds.argtypes = [ctypes.c_void_p]
_lib.hlocache_executable_seconds.restype = ctypes.c_double
for _name in ("parameter_count", "result_count"):
    getattr(_lib, f"hlocache_executable_{_name}").argtypes = [ctypes.c_void_p]
    getattr(_lib, f"hlocache_executable_{_name}").restype = _size_t
for _name in ("parameter_bytes", "result_bytes"):
    getattr(_lib, f"hlocache_executable_{_name}").argtypes = [ctypes.c_void_p, _size_t]
    getattr(_lib, f"hlocache_executable_{_name}").restype = _size_t
_lib.hlocache_executable_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                         ctypes.POINTER(ctypes.c_void_p), _c_char_p, _size_t]


def _text(hlo):
    return hlo.encode() if isinstance(hlo, str) else bytes(hlo)


def _target(target):
    return target.encode() if target else None


def initialize_cache(path=None, readonly=False):
    """Makes the process-wide cache from a spec: a directory, an http(s):// URL, or a
    comma-separated list of them (None: $HLOCACHE)."""
    error = ctypes.create_string_buffer(1024)
    spec = path.encode() if path else None
    if _lib.hlocache_initialize_cache(spec, 1 if readonly else 0, error, len(error)) != 0:
        raise HlocacheError(error.value.decode(errors="replace"))


def key(hlo, target=None):
    """The module's cache key, 'v1-' and 32 hex digits."""
    text = _text(hlo)
    out = ctypes.create_string_buffer(64)
    error = ctypes.create_string_buffer(1024)
    if _lib.hlocache_key(text, len(text), _target(target), out, error, len(error)) != 0:
        raise HlocacheError(error.value.decode(errors="replace"))
    return out.value.decode()


class Executable:
    """A loaded executable. run() takes one buffer per parameter leaf and returns one
    bytearray per result leaf (dense, row-major)."""

    def __init__(self, handle):
        self._handle = handle
        self.key = _lib.hlocache_executable_key(handle).decode()
        self.source = _lib.hlocache_executable_source(handle).decode()
        self.seconds = _lib.hlocache_executable_seconds(handle)
        self.parameter_bytes = [_lib.hlocache_executable_parameter_bytes(handle, i)
                                for i in range(_lib.hlocache_executable_parameter_count(handle))]
        self.result_bytes = [_lib.hlocache_executable_result_bytes(handle, i)
                             for i in range(_lib.hlocache_executable_result_count(handle))]

    def run(self, *inputs):
        if len(inputs) != len(self.parameter_bytes):
            raise HlocacheError(f"expected {len(self.parameter_bytes)} inputs, got {len(inputs)}")
        keep = []
        params = (ctypes.c_void_p * max(len(inputs), 1))()
        for i, (value, size) in enumerate(zip(inputs, self.parameter_bytes)):
            view = memoryview(value).cast("B")
            if view.nbytes != size:
                raise HlocacheError(f"input {i} has {view.nbytes} bytes; the executable takes {size}")
            buffer = (ctypes.c_char * size).from_buffer_copy(view) if view.readonly else \
                (ctypes.c_char * size).from_buffer(view)
            keep.append(buffer)
            params[i] = ctypes.addressof(buffer)
        outputs = [bytearray(size) for size in self.result_bytes]
        results = (ctypes.c_void_p * max(len(outputs), 1))()
        for k, out in enumerate(outputs):
            buffer = (ctypes.c_char * len(out)).from_buffer(out)
            keep.append(buffer)
            results[k] = ctypes.addressof(buffer)
        error = ctypes.create_string_buffer(1024)
        if _lib.hlocache_executable_run(self._handle, params, results, error, len(error)) != 0:
            raise HlocacheError(error.value.decode(errors="replace"))
        return outputs

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.hlocache_executable_free(self._handle)
            self._handle = None


def compile(hlo, target=None):  # noqa: A001 - the name users expect
    """The executable for an HLO module: from the cache, or compiled once and shared."""
    text = _text(hlo)
    error = ctypes.create_string_buffer(1024)
    handle = _lib.hlocache_compile(text, len(text), _target(target), error, len(error))
    if not handle:
        raise HlocacheError(error.value.decode(errors="replace"))
    return Executable(handle)
