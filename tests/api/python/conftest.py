"""Fixtures of the Python package's tests (run by tests/api/python_test.sh, ctest api.python).

Environment: KILN_BIN (the kiln executable, the reference), KILN_TEST_MODELS (the fixture models'
folder), KILN_DEFAULT_MODEL (models/kjv-llama-q8_0.gguf), KILN_LIBRARY (libkiln.so).
"""

import glob
import os
import subprocess

import pytest

KILN_BIN = os.environ["KILN_BIN"]
DEFAULT_MODEL = os.environ["KILN_DEFAULT_MODEL"]
FIXTURE_MODELS = sorted(glob.glob(os.path.join(os.environ["KILN_TEST_MODELS"], "*.gguf")))
CHAT_MODEL = os.path.join(os.environ["KILN_TEST_MODELS"], "qwen2-e64-Q8_0.gguf")  # has a chat template


def kiln_run(model: str, prompt: str, n: int, temp: float, seed: int) -> str:
    """What `kiln run --no-display-prompt` prints as the continuation (its final newline removed)."""
    out = subprocess.run(
        [KILN_BIN, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", str(temp), "--seed", str(seed),
         "--no-display-prompt"],
        check=True, capture_output=True,
    ).stdout.decode("utf-8", "replace")
    assert out.endswith("\n")
    return out[:-1]


@pytest.fixture(scope="session")
def kjv():
    import kiln

    with kiln.Model(DEFAULT_MODEL) as m:
        yield m
