"""kiln: run GGUF language models locally (ctypes bindings of libkiln, kiln's C API).

    import kiln
    model = kiln.Model("model.gguf", device="cpu", max_mem="cpu=8")
    print(model.generate("Once upon a time", max_tokens=32))
    print(model.chat([{"role": "user", "content": "Hi"}])["choices"][0]["message"]["content"])

Errors raise kiln.KilnError with kiln's message. Compute runs without the GIL.
"""

from ._model import Model
from ._native import KilnError, lib as _lib
from ._runtime import Runtime, devices, memory

__version__ = _lib.kiln_version().decode()

__all__ = ["KilnError", "Model", "Runtime", "devices", "memory", "__version__"]
