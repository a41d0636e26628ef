"""Model: a GGUF model placed on a device, with generation, chat, embeddings, evict/restore."""

from __future__ import annotations

import codecs
import ctypes
import json
import os
import pathlib
import queue
import random
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._native import KilnError, call, lib, read_text
from ._runtime import MaxMem, Runtime, default_runtime

Message = Mapping[str, Any]


class _Sampling:
    """Sampler parameters (kiln_sampler_params); strings are kept alive while it lives."""

    def __init__(self, temperature, top_k, top_p, min_p, seed, grammar, json_schema):
        self.params = _native.SamplerParamsC()
        call("kiln_sampler_default_params", ctypes.byref(self.params))
        p = self.params
        if temperature is not None:
            p.temperature = temperature
        if top_k is not None:
            p.top_k = top_k
        if top_p is not None:
            p.top_p = top_p
        if min_p is not None:
            p.min_p = min_p
        p.seed = random.getrandbits(32) if seed is None else seed
        self._grammar = grammar.encode() if grammar else None
        self._schema = json.dumps(json_schema).encode() if json_schema is not None else None
        p.grammar, p.json_schema = self._grammar, self._schema


class Model:
    """A GGUF language model loaded by kiln and placed on one device.

    Thread-safe: generate/chat/embed from several threads run on contexts of their own (each
    call takes a free context of the model or makes one), computing at once where the device
    allows. Free with close() (or a `with` block); the memory goes back to the runtime.
    """

    def __init__(
        self,
        path: str,
        *,
        device: str = "cpu",
        max_mem: MaxMem = None,
        n_ctx: int = 0,
        runtime: Optional[Runtime] = None,
        mmproj: Optional[Union[str, "os.PathLike[str]"]] = None,
        n_gpu_layers: Optional[int] = None,
        tensor_split: Optional[Sequence[float]] = None,
        split_mode: str = "layer",
        main_gpu: int = 0,
        override_tensor: Optional[str] = None,
        no_kv_offload: bool = False,
        fit: bool = True,
        segmented: bool = False,
    ):
        """path: a GGUF file; device: "cpu", "sim0", "vulkan0"..., or several ("sim0,sim1") to
        split the model over; max_mem: budgets of the default runtime ("cpu=8" GiB; see
        kiln.Runtime); n_ctx: KV cells of each context (0: the model's training context, at most
        4096); runtime: a kiln.Runtime of your own; mmproj: the model's vision and/or audio
        projector (llama.cpp's mmproj GGUF), so that generate() takes images and/or audio.
        A model larger than a device (llama.cpp's flags, see the README): n_gpu_layers (-ngl; None:
        all), tensor_split (-ts), split_mode ("layer" or "none", -sm), main_gpu (-mg),
        override_tensor ("PATTERN=DEVICE,...", -ot), no_kv_offload (-nkvo), fit (--fit: on by
        default, it splits a model that does not fit its device), segmented (--segmented: a device
        that cannot hold its layers streams them through its memory in segments)."""
        self.runtime = runtime if runtime is not None else default_runtime(max_mem)
        self.n_ctx = n_ctx
        options = _native.ModelOptionsC()
        call("kiln_model_default_options", ctypes.byref(options))
        if "," in device:
            options.devices = device.encode()
        else:
            options.device = device.encode()
        if n_gpu_layers is not None:
            options.n_gpu_layers = n_gpu_layers
        shares = (ctypes.c_float * len(tensor_split))(*tensor_split) if tensor_split else None
        if shares is not None:
            options.tensor_split = ctypes.cast(shares, ctypes.POINTER(ctypes.c_float))
            options.n_tensor_split = len(tensor_split)
        if split_mode not in ("layer", "none"):
            raise ValueError(f"split_mode {split_mode!r}: 'layer' or 'none'")
        options.split_mode = 1 if split_mode == "none" else 0
        options.main_gpu = main_gpu
        if override_tensor:
            options.override_tensor = override_tensor.encode()
        options.no_kv_offload = 1 if no_kv_offload else 0
        options.fit = 1 if fit else 0
        options.segmented = 1 if segmented else 0
        handle = ctypes.c_void_p()
        call("kiln_model_load", self.runtime._handle, path.encode(), ctypes.byref(options), ctypes.byref(handle))
        self._handle = handle
        self._mmproj = ctypes.c_void_p()
        self._lock = threading.Lock()
        self._free_contexts: List[ctypes.c_void_p] = []
        self._all_contexts: List[ctypes.c_void_p] = []
        if mmproj is not None:
            call("kiln_mmproj_load", handle, os.fsencode(mmproj), ctypes.byref(self._mmproj))
        self.name = read_text("kiln_model_name", handle)

    # ---- properties and text ----

    @property
    def n_vocab(self) -> int:
        v = ctypes.c_int32()
        call("kiln_model_n_vocab", self._handle, ctypes.byref(v))
        return v.value

    @property
    def n_embd(self) -> int:
        v = ctypes.c_int32()
        call("kiln_model_n_embd", self._handle, ctypes.byref(v))
        return v.value

    def metadata(self, key: str) -> str:
        """The string value of GGUF metadata `key` (KilnError when absent or not a string)."""
        return read_text("kiln_model_meta_string", self._handle, key.encode())

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> List[int]:
        """Token ids of `text` (with BOS as the model asks when add_special)."""
        data = text.encode()
        n = ctypes.c_int64()
        call("kiln_tokenize", self._handle, data, len(data), int(add_special), int(parse_special), None, 0, ctypes.byref(n))
        ids = (ctypes.c_int32 * max(1, n.value))()
        call("kiln_tokenize", self._handle, data, len(data), int(add_special), int(parse_special), ids, n.value, ctypes.byref(n))
        return list(ids[: n.value])

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        """The text of `tokens`."""
        ids = (ctypes.c_int32 * max(1, len(tokens)))(*tokens)
        return read_text("kiln_detokenize", self._handle, ids, len(tokens), int(special))

    def apply_chat_template(
        self, messages: Sequence[Message], *, tools: Optional[Sequence[Mapping]] = None, add_generation_prompt: bool = True
    ) -> str:
        """The prompt the model's chat template renders for OpenAI-style `messages` (and tools)."""
        extra = json.dumps({"tools": list(tools)}).encode() if tools else None
        return read_text(
            "kiln_model_apply_chat_template", self._handle, json.dumps(list(messages)).encode(), extra, int(add_generation_prompt)
        )

    # ---- memory ----

    def evict(self) -> None:
        """Moves the model's memory (weights, KV caches, compute) off its device now; the next
        call that computes (or restore()) brings it back, bit-exact."""
        call("kiln_model_evict", self._handle)

    def restore(self) -> None:
        """Brings back what evict() (or the budget) moved off the device."""
        call("kiln_model_restore", self._handle)

    @property
    def resident(self) -> bool:
        """Whether all of the model's memory is on its device now."""
        v = ctypes.c_int32()
        call("kiln_model_is_resident", self._handle, ctypes.byref(v))
        return bool(v.value)

    # ---- contexts ----

    def _new_context(self, **overrides: int) -> ctypes.c_void_p:
        opts = _native.ContextOptionsC()
        call("kiln_context_default_options", ctypes.byref(opts))
        opts.n_ctx = self.n_ctx
        opts.mmproj = self._mmproj
        for k, v in overrides.items():
            setattr(opts, k, v)
        handle = ctypes.c_void_p()
        call("kiln_context_create", self._handle, ctypes.byref(opts), ctypes.byref(handle))
        return handle

    def _take_context(self) -> ctypes.c_void_p:
        with self._lock:
            if self._free_contexts:
                return self._free_contexts.pop()
        ctx = self._new_context()
        with self._lock:
            self._all_contexts.append(ctx)
        return ctx

    def _give_back(self, ctx: ctypes.c_void_p) -> None:
        with self._lock:
            self._free_contexts.append(ctx)

    # ---- generation ----

    def _run(self, prompt: str, on_piece, sampling: _Sampling, max_tokens: int, stop, parse_special: bool,
             media: Sequence[Tuple[int, bytes]] = ()) -> dict:
        """kiln_generate on a context of the model; on_piece(bytes) -> bool (False stops);
        media: (kiln_media_type, bytes) in marker order."""
        sampler = ctypes.c_void_p()
        call("kiln_sampler_create", self._handle, ctypes.byref(sampling.params), ctypes.byref(sampler))
        stops = [s.encode() for s in (stop or [])]
        stop_array = (ctypes.c_char_p * max(1, len(stops)))(*stops)
        opts = _native.GenerateOptionsC()
        call("kiln_generate_default_options", ctypes.byref(opts))
        opts.max_tokens = max_tokens
        opts.parse_special = int(parse_special)
        opts.stop, opts.n_stop = stop_array, len(stops)
        buffers = [(kind, ctypes.create_string_buffer(bytes(b), len(b))) for kind, b in media]
        media_array = (_native.MediaC * max(1, len(buffers)))(
            *[_native.MediaC(kind, ctypes.cast(b, ctypes.POINTER(ctypes.c_uint8)), len(b)) for kind, b in buffers]
        )
        opts.media, opts.n_media = media_array, len(buffers)
        failure: List[BaseException] = []

        def callback(_user, _token, piece, length):
            try:
                return 0 if on_piece(ctypes.string_at(piece, length)) else 1
            except BaseException as e:  # noqa: BLE001 - handed back to the caller after the call
                failure.append(e)
                return 1

        c_callback = _native.TokenCallback(callback)
        result = _native.GenerateResultC()
        ctx = self._take_context()
        try:
            call("kiln_generate", ctx, sampler, prompt.encode(), ctypes.byref(opts), c_callback, None, ctypes.byref(result))
        finally:
            self._give_back(ctx)
            lib.kiln_sampler_free(sampler)
        if failure:
            raise failure[0]
        return {
            "prompt_tokens": result.n_prompt,
            "completion_tokens": result.n_generated,
            "finish_reason": _native.STOP_REASONS.get(result.stop, "stop"),
        }

    def generate(
        self,
        prompt: str,
        *,
        max_tokens: int = 256,
        temperature: Optional[float] = None,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        min_p: Optional[float] = None,
        seed: Optional[int] = None,
        stop: Optional[Sequence[str]] = None,
        grammar: Optional[str] = None,
        json_schema: Optional[Mapping] = None,
        parse_special: bool = False,
        stream: bool = False,
        images: Sequence[Union[bytes, str, "os.PathLike[str]"]] = (),
        audio: Sequence[Union[bytes, str, "os.PathLike[str]"]] = (),
    ) -> Union[str, Iterator[str]]:
        """Continues `prompt` as `kiln run -p PROMPT` does (same tokens for the same sampling
        and seed); with images (PNG or JPEG, as bytes or file paths; the model needs its
        mmproj), as `kiln run --image`: each "<__media__>" in the prompt stands for the next
        image, and a prompt without markers gets them in front; with audio (WAV, FLAC or MP3, as
        bytes or file paths; an mmproj with an audio encoder), as `kiln run --audio`, the markers
        after the images' stand for the audio files. Returns the text, or with stream=True an iterator of text pieces (whole UTF-8
        characters) as they are generated; closing the iterator early stops the generation.
        Unset sampling parameters take kiln's defaults (temperature 0.8, top-k 40, top-p 0.95,
        min-p 0.05); temperature 0 is greedy; seed None draws one. max_tokens -1: no limit."""
        sampling = _Sampling(temperature, top_k, top_p, min_p, seed, grammar, json_schema)
        def read(item):
            return item if isinstance(item, (bytes, bytearray)) else pathlib.Path(item).read_bytes()

        blobs = [(_native.MEDIA_IMAGE, read(i)) for i in images] + [(_native.MEDIA_AUDIO, read(a)) for a in audio]
        if not stream:
            pieces: List[bytes] = []
            self._run(prompt, lambda b: pieces.append(b) or True, sampling, max_tokens, stop, parse_special, blobs)
            return b"".join(pieces).decode("utf-8", "replace")
        return self._stream(prompt, sampling, max_tokens, stop, parse_special, blobs)

    def _stream(self, prompt, sampling, max_tokens, stop, parse_special, media=()) -> Iterator[str]:
        pieces: "queue.Queue" = queue.Queue()
        done = object()
        stopped = threading.Event()

        def produce():
            try:
                self._run(prompt, lambda b: pieces.put(b) or not stopped.is_set(), sampling, max_tokens, stop,
                          parse_special, media)
                pieces.put(done)
            except BaseException as e:  # noqa: BLE001 - raised in the consumer
                pieces.put(e)

        worker = threading.Thread(target=produce, name="kiln-generate", daemon=True)
        worker.start()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            while True:
                item = pieces.get()
                if item is done:
                    tail = decoder.decode(b"", final=True)
                    if tail:
                        yield tail
                    return
                if isinstance(item, BaseException):
                    raise item
                text = decoder.decode(item)
                if text:
                    yield text
        finally:
            stopped.set()
            worker.join()

    def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Optional[Sequence[Mapping]] = None,
        response_format: Optional[Mapping] = None,
        max_tokens: int = 256,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        seed: Optional[int] = None,
        stop: Optional[Sequence[str]] = None,
    ) -> Dict[str, Any]:
        """A chat completion shaped as OpenAI's (`{"choices": [{"message": {"role":
        "assistant", "content": ...}, "finish_reason": ...}], "usage": {...}, ...}`). The
        messages (and tools) go through the model's chat template. response_format:
        {"type": "json_object"}, or {"type": "json_schema", "json_schema": {"schema": {...}}}: the
        reply follows it (grammar-constrained). With tools, the prompt and the reply are the
        server's (kiln_model_chat_prompt, parse_chat_output): the tool calls in the reply come
        back parsed in message["tool_calls"], finish_reason "tool_calls". The calls are not
        grammar-constrained as the server's are."""
        schema = None
        if response_format is not None:
            kind = response_format.get("type")
            if kind == "json_object":
                schema = {"type": "object"}
            elif kind == "json_schema":
                schema = response_format.get("json_schema", {}).get("schema", {})
            elif kind != "text":
                raise KilnError(f"response_format: unknown type {kind!r} (text, json_object, json_schema)", 1)
        if tools:
            request = json.dumps({"messages": list(messages), "tools": list(tools)}).encode()
            prompt = read_text("kiln_model_chat_prompt", self._handle, request)
        else:
            prompt = self.apply_chat_template(messages)
        sampling = _Sampling(temperature, None, top_p, None, seed, None, schema)
        pieces: List[bytes] = []
        usage = self._run(prompt, lambda b: pieces.append(b) or True, sampling, max_tokens, stop, parse_special=True)
        text = b"".join(pieces).decode("utf-8", "replace")
        message = self.parse_chat_output(text, messages, tools=tools) if tools else {"role": "assistant", "content": text}
        finish_reason = "tool_calls" if message.get("tool_calls") else usage["finish_reason"]
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
            },
        }

    def parse_chat_output(
        self, output: str, messages: Sequence[Message], *, tools: Optional[Sequence[Mapping]] = None
    ) -> Dict[str, Any]:
        """`output`, the model's answer to `messages` (and tools), as the server's chat message:
        {"role": "assistant", "content": ..., "tool_calls"?: [{"id", "type": "function",
        "function": {"name", "arguments"}}], "reasoning_content"?: ...}, parsed by the server's
        parser for the model's template. Calls without an id get "call_" and a random hex."""
        request = json.dumps({"messages": list(messages), "tools": list(tools or [])}).encode()
        message = json.loads(read_text("kiln_model_parse_chat_output", self._handle, request, output.encode()))
        for c in message.get("tool_calls", []):
            if not c["id"]:
                c["id"] = "call_" + uuid.uuid4().hex
        return message

    def embed(self, texts: Union[str, Sequence[str]]) -> List[List[float]]:
        """Embeddings of `texts` as `kiln serve --embeddings` gives them (/v1/embeddings): each
        text tokenized with its special tokens, pooled as the model says, scaled to norm 1."""
        if isinstance(texts, str):
            texts = [texts]
        inputs = [self.tokenize(t, add_special=True, parse_special=True) for t in texts]
        longest = max((len(t) for t in inputs), default=0)
        if longest == 0:
            raise KilnError("embed: no tokens to embed", 1)
        ctx = self._new_context(n_ctx=longest, n_batch=longest, n_ubatch=min(512, longest), embeddings=1)
        try:
            out = []
            width = self.n_embd
            for ids in inputs:
                tokens = (ctypes.c_int32 * max(1, len(ids)))(*ids)
                vec = (ctypes.c_float * width)()
                n = ctypes.c_int64()
                call("kiln_embed", ctx, tokens, len(ids), 1, vec, width, ctypes.byref(n))
                out.append(list(vec[: n.value]))
            return out
        finally:
            lib.kiln_context_free(ctx)

    # ---- lifetime ----

    def close(self) -> None:
        """Frees the model and its contexts (it is unusable afterwards)."""
        handle = getattr(self, "_handle", None)
        if handle is None:
            return
        for ctx in self._all_contexts:
            lib.kiln_context_free(ctx)
        self._all_contexts, self._free_contexts = [], []
        if self._mmproj:
            lib.kiln_mmproj_free(self._mmproj)
        lib.kiln_model_free(handle)
        self._handle = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone already
            pass
