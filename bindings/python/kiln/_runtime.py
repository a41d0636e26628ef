"""Runtime: the devices of the process (kiln_runtime), and the default one kiln.Model uses."""

from __future__ import annotations

import ctypes
import threading
from typing import Dict, List, Mapping, Optional, Union

from . import _native
from ._native import KilnError, call, lib

MaxMem = Union[str, Mapping[str, float], None]


def parse_max_mem(max_mem: MaxMem) -> Dict[str, float]:
    """`"cpu=8,sim0=2"` (kiln's --max-mem, GiB) or `{"cpu": 8}` as a dict of device to GiB."""
    if max_mem is None:
        return {}
    if isinstance(max_mem, str):
        out = {}
        for part in filter(None, max_mem.split(",")):
            device, sep, gib = part.partition("=")
            if not sep:
                raise KilnError(f"max_mem: '{part}' is not DEVICE=GiB", 1)
            try:
                out[device.strip()] = float(gib)
            except ValueError:
                raise KilnError(f"max_mem: '{gib}' (for {device}) is not a number of GiB", 1) from None
        return out
    return {str(k): float(v) for k, v in max_mem.items()}


class Runtime:
    """The devices models run on: the CPU, simulated accelerators, Vulkan GPUs, each with an
    optional memory budget (GiB; models evict each other's memory to stay within it).

    Thread-safe. Models keep their runtime alive; it is freed when the last reference goes.
    """

    def __init__(
        self,
        *,
        max_mem: MaxMem = None,
        threads: int = 0,
        sim_devices: Optional[Mapping[str, int]] = None,
        swap_dir: Optional[str] = None,
        vulkan: bool = False,
        arbiter_dir: Optional[str] = None,
        arbiter_timeout: float = 0,
    ):
        """max_mem: budgets per device ("cpu=8,sim0=2" or {"cpu": 8}); threads: compute threads
        (0: every core); sim_devices: {"sim0": capacity_bytes}; swap_dir: where evicted KV caches
        go (default: host memory); vulkan: look for Vulkan GPUs; arbiter_dir: take turns on the
        devices with other processes that name it (`kiln serve --arbiter DIR`: when another
        waits and this runtime is idle, its models are evicted); arbiter_timeout: seconds a call
        waits for its turn before it raises KilnError (0: 60)."""
        self.max_mem = parse_max_mem(max_mem)
        opts = _native.RuntimeOptionsC()
        call("kiln_runtime_default_options", ctypes.byref(opts))
        budgets = (_native.BudgetC * max(1, len(self.max_mem)))()
        for i, (device, gib) in enumerate(self.max_mem.items()):
            budgets[i] = _native.BudgetC(device.encode(), gib)
        sims = dict(sim_devices or {})
        sim_array = (_native.SimDeviceC * max(1, len(sims)))()
        for i, (name, capacity) in enumerate(sims.items()):
            sim_array[i] = _native.SimDeviceC(name.encode(), int(capacity))
        opts.n_threads = threads
        opts.budgets, opts.n_budgets = budgets, len(self.max_mem)
        opts.sim_devices, opts.n_sim_devices = sim_array, len(sims)
        opts.swap_dir = swap_dir.encode() if swap_dir else None
        opts.vulkan = 1 if vulkan else 0
        opts.arbiter_dir = arbiter_dir.encode() if arbiter_dir else None
        opts.arbiter_timeout_ms = int(arbiter_timeout * 1000)
        handle = ctypes.c_void_p()
        call("kiln_runtime_create", ctypes.byref(opts), ctypes.byref(handle))
        self._handle = handle

    def devices(self) -> List[dict]:
        """Every device: {"name", "kind", "description", "total", "free"} (bytes)."""
        n = ctypes.c_int64()
        call("kiln_runtime_device_count", self._handle, ctypes.byref(n))
        out = []
        for i in range(n.value):
            info = _native.DeviceInfoC()
            call("kiln_runtime_device_info", self._handle, i, ctypes.byref(info))
            out.append(
                {
                    "name": info.name.decode(),
                    "kind": info.kind.decode(),
                    "description": info.description.decode(),
                    "total": info.total,
                    "free": info.free,
                }
            )
        return out

    def memory(self) -> List[dict]:
        """The memory breakdown: per device {"device", "total", "free", "budget" (None: no
        budget), "counted", "owners": [{"owner", "weights", "kv", "compute", "scratch",
        "evicted", "pinned"}]} (bytes)."""
        n = ctypes.c_int64()
        call("kiln_runtime_memory", self._handle, None, 0, ctypes.byref(n))
        rows = (_native.MemoryRowC * max(1, n.value))()
        call("kiln_runtime_memory", self._handle, rows, n.value, ctypes.byref(n))
        devices: List[dict] = []
        for r in rows[: n.value]:
            if not r.owner:
                devices.append(
                    {
                        "device": r.device.decode(),
                        "total": r.total,
                        "free": r.free,
                        "budget": None if r.budget == 2**64 - 1 else r.budget,
                        "counted": r.counted,
                        "owners": [],
                    }
                )
            else:
                devices[-1]["owners"].append(
                    {
                        "owner": r.owner.decode(),
                        "weights": r.weights,
                        "kv": r.kv,
                        "compute": r.compute,
                        "scratch": r.scratch,
                        "evicted": r.evicted,
                        "pinned": bool(r.pinned),
                    }
                )
        return devices

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value and lib is not None:
            lib.kiln_runtime_free(handle)  # refused (and kept) while models of it live
            self._handle = None


_default: Optional[Runtime] = None
_default_lock = threading.Lock()


def default_runtime(max_mem: MaxMem = None) -> Runtime:
    """The process's default runtime, made at the first call (with `max_mem`); a later call that
    asks for other budgets is an error (make a kiln.Runtime of its own instead)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runtime(max_mem=max_mem)
        elif max_mem is not None and parse_max_mem(max_mem) != _default.max_mem:
            raise KilnError(
                f"max_mem {max_mem!r}: the default runtime already has budgets {_default.max_mem}; "
                "pass runtime=kiln.Runtime(max_mem=...) instead",
                1,
            )
        return _default


def devices() -> List[dict]:
    """The default runtime's devices (kiln.Runtime.devices)."""
    return default_runtime().devices()


def memory() -> List[dict]:
    """The default runtime's memory breakdown (kiln.Runtime.memory)."""
    return default_runtime().memory()
