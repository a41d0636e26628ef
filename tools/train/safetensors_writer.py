"""Writes a .safetensors file. ref: https://github.com/huggingface/safetensors (format):
8-byte little-endian header length N, N bytes of JSON header (padded with spaces to a multiple
of 8, as the reference writer does), then the tensors' bytes back to back, each tensor at
[begin, end) relative to the end of the header."""
import json
import struct

import torch

_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: torch.Tensor}, written in name order (as the reference writer does for
    equal dtype alignment); metadata: {str: str} stored under __metadata__."""
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype not in _DTYPES:
            raise ValueError(f"safetensors: tensor {name!r} has unsupported dtype {t.dtype}")
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
