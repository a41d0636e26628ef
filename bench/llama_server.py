"""llama.cpp's llama-server on a free loopback port, for the scripts that compare with it
(bench/compare_speculative.py, tests/llm/data/make_spec_refs.py). Standard library only.

  with LlamaServer("/path/llama-server", ["-m", "model.gguf", "-t", "2"]) as server:
      reply = server.request("/completion", {"prompt": "Hi", "n_predict": 8})
"""
import json
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """Starts the server with `args` (host and port added) and waits until /health answers ok; exits
    the script with the server's stderr when it does not start."""

    def __init__(self, binary, args):
        self.port = free_port()
        # `binary` may be a command with a subcommand, as [kiln, "serve"].
        cmd = ([binary] if isinstance(binary, str) else list(binary)) + ["--host", "127.0.0.1", "--port",
                                                                        str(self.port)] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(3000):
            try:
                if self.request("/health", timeout=5).get("status") == "ok":
                    return
            except Exception:
                if self.proc.poll() is not None:
                    sys.exit("llama-server failed: %s\n%s" % (" ".join(cmd), self.proc.stderr.read().decode()))
                time.sleep(0.2)
        self.close()
        sys.exit("llama-server did not start: %s" % " ".join(cmd))

    def request(self, path, body=None, timeout=1800):
        """GET `path`, or POST `body` as JSON; the JSON reply."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.terminate()
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
