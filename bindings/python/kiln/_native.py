"""libkiln.so through ctypes: the C structs and function prototypes of include/kiln/kiln.h.

Every call goes through `call()`, which raises KilnError with kiln_last_error()'s message when
the status is not KILN_OK. ctypes releases the GIL for the duration of each call into a CDLL, so
decoding and generation run without it (a token callback takes it back for its own duration).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import POINTER, c_char, c_char_p, c_double, c_float, c_int32, c_int64, c_uint64, c_void_p

API_VERSION = 4  # the KILN_API_VERSION these bindings are written for
MAX_SEQUENCES = 64
OK = 0


class KilnError(RuntimeError):
    """An error kiln reported; the message is kiln_last_error()'s (it names the function and
    the thing: the file, the key, the token, the numbers)."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def _load() -> ctypes.CDLL:
    path = os.environ.get("KILN_LIBRARY") or ctypes.util.find_library("kiln") or f"libkiln.so.{API_VERSION}"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"kiln: cannot load libkiln ({path}): {e}; set KILN_LIBRARY to its path") from e
    lib.kiln_api_version.restype = c_int32
    if lib.kiln_api_version() != API_VERSION:
        raise ImportError(
            f"kiln: {path} has API version {lib.kiln_api_version()}, these bindings need {API_VERSION}"
        )
    return lib


class BudgetC(ctypes.Structure):
    _fields_ = [("device", c_char_p), ("gib", c_double)]


class SimDeviceC(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("capacity", c_uint64)]


class RuntimeOptionsC(ctypes.Structure):
    _fields_ = [
        ("n_threads", c_int32),
        ("sim_devices", POINTER(SimDeviceC)),
        ("n_sim_devices", c_int64),
        ("budgets", POINTER(BudgetC)),
        ("n_budgets", c_int64),
        ("swap_dir", c_char_p),
        ("vulkan", c_int32),
        ("arbiter_dir", c_char_p),
        ("arbiter_timeout_ms", c_int32),
    ]


class DeviceInfoC(ctypes.Structure):
    _fields_ = [
        ("name", c_char * 64),
        ("kind", c_char * 32),
        ("description", c_char * 128),
        ("total", c_uint64),
        ("free", c_uint64),
    ]


class MemoryRowC(ctypes.Structure):
    _fields_ = [
        ("device", c_char * 64),
        ("owner", c_char * 128),
        ("total", c_uint64),
        ("free", c_uint64),
        ("budget", c_uint64),
        ("counted", c_uint64),
        ("weights", c_uint64),
        ("kv", c_uint64),
        ("compute", c_uint64),
        ("scratch", c_uint64),
        ("evicted", c_int64),
        ("pinned", c_int32),
    ]


class ModelOptionsC(ctypes.Structure):
    _fields_ = [
        ("device", c_char_p),
        ("no_mmap", c_int32),
        ("mlock", c_int32),
        ("devices", c_char_p),
        ("n_gpu_layers", c_int32),
        ("split_mode", c_int32),
        ("tensor_split", POINTER(ctypes.c_float)),
        ("n_tensor_split", c_int32),
        ("main_gpu", c_int32),
        ("override_tensor", c_char_p),
        ("no_kv_offload", c_int32),
        ("fit", c_int32),
        ("fit_target_mib", c_int64),
        ("fit_n_ctx", c_int64),
        ("segmented", c_int32),
    ]


class ContextOptionsC(ctypes.Structure):
    _fields_ = [
        ("n_ctx", c_int64),
        ("n_batch", c_int64),
        ("n_ubatch", c_int64),
        ("embeddings", c_int32),
        ("mmproj", c_void_p),
    ]


MEDIA_IMAGE = 0  # kiln_media_type
MEDIA_AUDIO = 1


class MediaC(ctypes.Structure):
    _fields_ = [("type", c_int32), ("data", POINTER(ctypes.c_uint8)), ("size", c_int64)]


class SamplerParamsC(ctypes.Structure):
    _fields_ = [
        ("seed", c_uint64),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("typical_p", c_float),
        ("penalty_last_n", c_int32),
        ("repeat_penalty", c_float),
        ("frequency_penalty", c_float),
        ("presence_penalty", c_float),
        ("grammar", c_char_p),
        ("json_schema", c_char_p),
    ]


class GenerateOptionsC(ctypes.Structure):
    _fields_ = [
        ("max_tokens", c_int64),
        ("seq", c_int32),
        ("parse_special", c_int32),
        ("stop", POINTER(c_char_p)),
        ("n_stop", c_int64),
        ("media", POINTER(MediaC)),
        ("n_media", c_int64),
    ]


class GenerateResultC(ctypes.Structure):
    _fields_ = [("n_prompt", c_int64), ("n_generated", c_int64), ("stop", ctypes.c_int)]


TokenCallback = ctypes.CFUNCTYPE(c_int32, c_void_p, c_int32, POINTER(c_char), c_int64)

STOP_REASONS = {0: "stop", 1: "length", 2: "stop", 3: "length", 4: "stop"}  # OpenAI finish_reason

_p = c_void_p
_PROTOTYPES = {
    "kiln_last_error": (c_char_p, []),
    "kiln_version": (c_char_p, []),
    "kiln_runtime_default_options": (c_int32, [POINTER(RuntimeOptionsC)]),
    "kiln_runtime_create": (c_int32, [POINTER(RuntimeOptionsC), POINTER(_p)]),
    "kiln_runtime_free": (c_int32, [_p]),
    "kiln_runtime_device_count": (c_int32, [_p, POINTER(c_int64)]),
    "kiln_runtime_device_info": (c_int32, [_p, c_int64, POINTER(DeviceInfoC)]),
    "kiln_runtime_memory": (c_int32, [_p, POINTER(MemoryRowC), c_int64, POINTER(c_int64)]),
    "kiln_model_default_options": (c_int32, [POINTER(ModelOptionsC)]),
    "kiln_model_load": (c_int32, [_p, c_char_p, POINTER(ModelOptionsC), POINTER(_p)]),
    "kiln_model_free": (c_int32, [_p]),
    "kiln_model_n_vocab": (c_int32, [_p, POINTER(c_int32)]),
    "kiln_model_n_embd": (c_int32, [_p, POINTER(c_int32)]),
    "kiln_model_n_ctx_train": (c_int32, [_p, POINTER(c_int64)]),
    "kiln_model_name": (c_int32, [_p, c_char_p, c_int64, POINTER(c_int64)]),
    "kiln_model_meta_string": (c_int32, [_p, c_char_p, c_char_p, c_int64, POINTER(c_int64)]),
    "kiln_model_apply_chat_template": (c_int32, [_p, c_char_p, c_char_p, c_int32, c_char_p, c_int64, POINTER(c_int64)]),
    "kiln_model_parse_chat_output": (c_int32, [_p, c_char_p, c_char_p, c_char_p, c_int64, POINTER(c_int64)]),
    "kiln_model_chat_prompt": (c_int32, [_p, c_char_p, c_char_p, c_int64, POINTER(c_int64)]),
    "kiln_model_evict": (c_int32, [_p]),
    "kiln_model_restore": (c_int32, [_p]),
    "kiln_model_is_resident": (c_int32, [_p, POINTER(c_int32)]),
    "kiln_tokenize": (c_int32, [_p, c_char_p, c_int64, c_int32, c_int32, POINTER(c_int32), c_int64, POINTER(c_int64)]),
    "kiln_detokenize": (c_int32, [_p, POINTER(c_int32), c_int64, c_int32, c_char_p, c_int64, POINTER(c_int64)]),
    "kiln_mmproj_load": (c_int32, [_p, c_char_p, POINTER(_p)]),
    "kiln_mmproj_free": (c_int32, [_p]),
    "kiln_context_default_options": (c_int32, [POINTER(ContextOptionsC)]),
    "kiln_context_create": (c_int32, [_p, POINTER(ContextOptionsC), POINTER(_p)]),
    "kiln_context_free": (c_int32, [_p]),
    "kiln_embed": (c_int32, [_p, POINTER(c_int32), c_int64, c_int32, POINTER(c_float), c_int64, POINTER(c_int64)]),
    "kiln_sampler_default_params": (c_int32, [POINTER(SamplerParamsC)]),
    "kiln_sampler_create": (c_int32, [_p, POINTER(SamplerParamsC), POINTER(_p)]),
    "kiln_sampler_free": (c_int32, [_p]),
    "kiln_generate_default_options": (c_int32, [POINTER(GenerateOptionsC)]),
    "kiln_generate": (c_int32, [_p, _p, c_char_p, POINTER(GenerateOptionsC), TokenCallback, _p, POINTER(GenerateResultC)]),
}

lib = _load()
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _f = getattr(lib, _name)
    _f.restype = _restype
    _f.argtypes = _argtypes


def call(name: str, *args) -> None:
    """Calls kiln function `name`; raises KilnError with kiln's message unless it returns KILN_OK."""
    status = getattr(lib, name)(*args)
    if status != OK:
        raise KilnError(lib.kiln_last_error().decode("utf-8", "replace"), status)


def read_text(name: str, *args) -> str:
    """Calls a kiln function with a string output (buf, size, length as its last arguments)."""
    length = c_int64(0)
    call(name, *args, None, 0, ctypes.byref(length))
    buf = ctypes.create_string_buffer(length.value + 1)
    call(name, *args, buf, length.value + 1, ctypes.byref(length))
    return buf.raw[: length.value].decode("utf-8", "replace")
