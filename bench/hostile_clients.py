#!/usr/bin/python3
"""Replays issue 30's hostile requests against a running `kiln serve` and prints what each got.

  bench/hostile_clients.py [--port 8080] [--only NAME,...] [--big]

Each case sends its request on a fresh loopback connection and prints one line: the case, the
request's size, the status (0: no answer, the connection dropped or timed out), the time it took,
and the start of the error message; then GET /health must still answer 200 ("alive"), or the
server is taken as down and the run stops. Cases that stall the engine (grammar cost) also time a
concurrent short chat while they run. --big adds the cases that send 10 MB or more (findings 5).
The findings that are not one HTTP request (6: a shared folder others can write; 7: RLIMIT_FSIZE)
are covered by tests/runtime/shared_dir_test.cpp and tests/server/fault_test.cpp. Images need a
server with --mmproj (the image cases answer 400 "needs a vision projector" otherwise). Talks to
127.0.0.1 only. Standard library only.
"""
import argparse
import base64
import http.client
import json
import os
import struct
import sys
import threading
import time
import zlib

TIMEOUT = 120.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post(port, path, body, headers=None, timeout=TIMEOUT):
    """(status, seconds, body text) of one POST on a fresh connection; status 0 when none came."""
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        return r.status, time.monotonic() - t0, text
    except Exception as e:  # a dropped connection or a timeout
        return 0, time.monotonic() - t0, repr(e)


def alive(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/health")
        return c.getresponse().status == 200
    except Exception:
        return False


def message_of(text):
    try:
        return json.loads(text)["error"]["message"]
    except Exception:
        return text


USER = {"role": "user", "content": "x"}


def chat(**fields):
    return {"messages": [USER], "max_tokens": 2, **fields}


def ref_chain(n):
    defs = [{"$ref": "#/$defs/%d" % (i + 1)} for i in range(n - 1)] + [{"type": "string"}]
    return {"$ref": "#/$defs/0", "$defs": defs}


def rule_chain(n, last='"x"'):
    return "root ::= r0\n" + "".join("r%d ::= r%d\n" % (i, i + 1) for i in range(n - 1)) + "r%d ::= %s\n" % (n - 1, last)


def png_header(width, height):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk


def jpeg_declaring(width, height):
    """A small JPEG of the repository whose SOF0/SOF2 now declares width x height."""
    data = bytearray(open(os.path.join(REPO, "tests/image/data/ycc420.jpg"), "rb").read())
    for i in range(len(data) - 9):
        if data[i] == 0xFF and data[i + 1] in (0xC0, 0xC2):
            data[i + 5:i + 9] = struct.pack(">HH", height, width)
            return bytes(data)
    raise RuntimeError("no SOF marker")


def image_chat(data, mime):
    url = "data:%s;base64,%s" % (mime, base64.b64encode(data).decode())
    return {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": "what is it?"}]}],
            "max_tokens": 1}


def tool(name, parameters):
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


PYDANTIC = {"type": "object", "properties": {"item": {"$ref": "#/$defs/Item"}}, "required": ["item"],
            "$defs": {"Item": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}


def cases(big):
    """(name, finding, path, body, headers, stalls): stalls cases time a concurrent chat."""
    deep = "[" * 35000 + "]" * 35000
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}
    out = [
        ("schema $ref chain 10,000 (/completion)", 1, "/completion", {"prompt": "x", "json_schema": ref_chain(10000)}),
        ("schema $ref chain 10,000 (chat)", 1, "/v1/chat/completions",
         chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": ref_chain(10000)}})),
        ("tool-call arguments nested 35,000", 1, "/v1/chat/completions",
         {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [call]},
                       {"role": "tool", "tool_call_id": "c1", "content": "1"}], "max_tokens": 1}),
        ("GBNF chain of 100,000 rules", 2, "/completion", {"prompt": "x", "grammar": rule_chain(100000), "n_predict": 1}),
        ("GBNF chain closed into a loop", 2, "/completion", {"prompt": "x", "grammar": rule_chain(100000, "r0"), "n_predict": 1}),
        ('grammar "a"? x 5,000', 3, "/completion", {"prompt": "x", "grammar": "root ::= " + '"a"? ' * 5000, "n_predict": 2}),
        ('grammar "hello" then "a"? x 5,000', 3, "/completion",
         {"prompt": "Say hello", "grammar": 'root ::= "hello" ' + '"a"? ' * 5000, "n_predict": 8, "temperature": 0}),
        ("enum of 200,000 strings", 3, "/completion",
         {"prompt": "x", "json_schema": {"enum": ["v%d" % i for i in range(200000)]}, "n_predict": 2}),
        ("small JPEG declaring 8192 x 8192", 4, "/v1/chat/completions",
         image_chat(jpeg_declaring(8192, 8192), "image/jpeg")),
        ("PNG header alone declaring 8192 x 8192", 4, "/v1/chat/completions", image_chat(png_header(8192, 8192), "image/png")),
        ("tool parameters with $defs/$ref (Pydantic)", 8, "/v1/chat/completions",
         chat(tools=[tool("add", PYDANTIC)], tool_choice="required")),
        ("minimum -9223372036854775808", 8, "/completion",
         {"prompt": "x", "json_schema": {"type": "integer", "minimum": -9223372036854775808}, "n_predict": 1}),
        ('{"$ref": "#"} (a tree)', 8, "/completion",
         {"prompt": "x", "n_predict": 1,
          "json_schema": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}}),
    ]
    if big:
        out += [
            ("/tokenize with_pieces of 15.9 MB", 5, "/tokenize", {"content": "ab " * (5300 << 10), "with_pieces": True}),
            ("chat prompt of 10 MB", 5, "/v1/chat/completions", chat(messages=[{"role": "user", "content": "word " * (2 << 20)}])),
        ]
    return [(n, f, p, b, None, f == 3) for n, f, p, b in out]


def timed_chat(port, result):
    status, seconds, _ = post(port, "/v1/chat/completions", chat(), timeout=60)
    result.append((status, seconds))


def control_case(port):
    """Finding 9: the id's form, and a control request from another key."""
    body = chat(max_tokens=200, stream=True, reasoning_control=True)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json", "Authorization": "Bearer owner"})
    r = c.getresponse()
    line = b""
    while not line.startswith(b"data: {"):
        line = r.fp.readline()
        if not line:
            return "no stream"
    cid = json.loads(line[6:])["id"]
    status, _, text = post(port, "/v1/chat/completions/control", {"id": cid, "action": "reasoning_end"},
                           headers={"Authorization": "Bearer someone-else"})
    c.close()
    return "id %s; another key's control: %s %s" % (cid, status, text.strip()[:80])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--only", default="", help="comma-separated substrings of case names")
    ap.add_argument("--big", action="store_true", help="also the 10 MB+ cases (finding 5)")
    a = ap.parse_args()
    if not alive(a.port):
        sys.exit("hostile_clients: no server answers GET /health on 127.0.0.1:%d" % a.port)
    only = [s for s in a.only.split(",") if s]
    for name, finding, path, body, headers, stalls in cases(a.big):
        if only and not any(s in name for s in only):
            continue
        size = len(json.dumps(body))
        side = []
        t = None
        if stalls:
            t = threading.Thread(target=lambda: (time.sleep(0.5), timed_chat(a.port, side)))
            t.start()
        status, seconds, text = post(a.port, path, body, headers)
        if t:
            t.join()
        note = message_of(text)[:100].replace("\n", " ") if status != 200 else ""
        extra = " | concurrent chat: %s in %.1f s" % side[0] if side else ""
        print("[%2d] %-44s %9d B  %3d  %7.0f ms  %s%s" % (finding, name, size, status, seconds * 1000, note, extra))
        if not alive(a.port):
            print("     the server no longer answers /health: stopping")
            sys.exit(1)
    if not only or any(s in "control" for s in only):
        print("[ 9] %-44s %s" % ("completion id and control", control_case(a.port)))
    try:
        c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=10)
        c.request("GET", "/v1/memory")
        memory = json.loads(c.getresponse().read())
        names = [o.get("name") for d in memory.get("devices", []) for o in d.get("owners", [])]
        print("[10] %-44s %s" % ("/v1/memory owners", ", ".join(str(n) for n in names)))
    except Exception as e:
        print("[10] /v1/memory: %r" % e)


if __name__ == "__main__":
    main()
