"""One chat turn with a local model through kiln's Python package: prints the reply, and the
token counts to stderr.

    python3 examples/python/chat.py MODEL.gguf "Hello!"
"""

import json
import sys

import kiln


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: chat.py MODEL.gguf MESSAGE", file=sys.stderr)
        return 2
    path, message = sys.argv[1], sys.argv[2]
    try:
        with kiln.Model(path) as model:
            reply = model.chat([{"role": "user", "content": message}], max_tokens=64)
    except kiln.KilnError as e:
        print(f"chat.py: {e}", file=sys.stderr)
        return 1
    print(reply["choices"][0]["message"]["content"])
    print(json.dumps(reply["usage"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
