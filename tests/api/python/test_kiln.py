"""The Python package over libkiln.so: generation equals `kiln run` (with an image and with audio too), streaming,
chat with a JSON schema, embeddings equal to `kiln serve`'s, evict/restore, a model split over devices, errors as
exceptions, two threads."""

import json
import os
import re
import subprocess
import sys
import threading
import urllib.request

import jsonschema
import pytest

import kiln
from conftest import CHAT_MODEL, DEFAULT_MODEL, FIXTURE_MODELS, KILN_BIN, kiln_run

PROMPT = "In the beginning God created"


@pytest.mark.parametrize("path", [DEFAULT_MODEL] + FIXTURE_MODELS, ids=os.path.basename)
@pytest.mark.parametrize("temp,seed", [(0.0, 0), (0.8, 42)], ids=["greedy", "seeded"])
def test_generate_equals_kiln_run(path, temp, seed):
    with kiln.Model(path) as model:
        got = model.generate(PROMPT, max_tokens=24, temperature=temp, seed=seed)
    assert got == kiln_run(path, PROMPT, 24, temp, seed)


def test_generate_with_an_image_equals_kiln_run_with_it():
    models = os.environ["KILN_TEST_MODELS"]
    text_model = os.path.join(models, "llama-spm-e128-f32.gguf")
    mmproj = os.path.join(models, "..", "mtmd", "mmproj-gemma3.gguf")
    image = os.path.join(os.path.dirname(__file__), "..", "..", "conformance", "data", "mtmd", "test-224.png")
    prompt = "USER: <__media__>Describe the image.\nASSISTANT:"
    expected = subprocess.run(
        [KILN_BIN, "run", "-m", text_model, "--mmproj", mmproj, "--image", image, "-p", prompt, "-n", "8",
         "--temp", "0", "--no-display-prompt"],
        check=True, capture_output=True,
    ).stdout.decode("utf-8", "replace")[:-1]
    with kiln.Model(text_model, mmproj=mmproj) as model:
        with open(image, "rb") as f:
            from_bytes = model.generate(prompt, max_tokens=8, temperature=0, images=[f.read()])
        from_path = model.generate(prompt, max_tokens=8, temperature=0, images=[image])
        text_only = model.generate("USER: Describe the image.\nASSISTANT:", max_tokens=8, temperature=0)
        with pytest.raises(kiln.KilnError, match="image"):
            model.generate(prompt, max_tokens=2, images=[b"\x89PNG not really"])
    assert expected and from_bytes == expected and from_path == expected
    assert text_only != expected
    with kiln.Model(text_model) as model, pytest.raises(kiln.KilnError, match="mmproj"):
        model.generate(prompt, max_tokens=2, images=[image])


def test_generate_with_audio_equals_kiln_run_with_it():
    models = os.environ["KILN_TEST_MODELS"]
    text_model = os.path.join(models, "llama-spm-e128-f32.gguf")
    here = os.path.dirname(__file__)
    mmproj = os.path.join(here, "..", "..", "conformance", "data", "mtmd-audio", "mmproj-qwen2a.gguf")
    wav = os.path.join(here, "..", "..", "data", "audio", "voiced-16k.wav")
    prompt = "USER: <__media__>Describe the audio.\nASSISTANT:"
    expected = subprocess.run(
        [KILN_BIN, "run", "-m", text_model, "--mmproj", mmproj, "--audio", wav, "-p", prompt, "-n", "8",
         "--temp", "0", "--no-display-prompt"],
        check=True, capture_output=True,
    ).stdout.decode("utf-8", "replace")[:-1]
    with kiln.Model(text_model, mmproj=mmproj) as model:
        with open(wav, "rb") as f:
            from_bytes = model.generate(prompt, max_tokens=8, temperature=0, audio=[f.read()])
        from_path = model.generate(prompt, max_tokens=8, temperature=0, audio=[wav])
        with pytest.raises(kiln.KilnError, match="media\\[0\\]: audio: "):
            model.generate(prompt, max_tokens=2, audio=[b"RIFF\x08\x00\x00\x00WAVE"])
        with pytest.raises(kiln.KilnError, match="takes no images"):  # the file holds an audio encoder only
            model.generate(prompt, max_tokens=2, images=[wav])
    assert expected and from_bytes == expected and from_path == expected


def test_stream_yields_the_same_text_in_pieces(kjv):
    whole = kjv.generate(PROMPT, max_tokens=20, temperature=0)
    pieces = list(kjv.generate(PROMPT, max_tokens=20, temperature=0, stream=True))
    assert len(pieces) > 1
    assert "".join(pieces) == whole


def test_closing_a_stream_stops_the_generation(kjv):
    stream = kjv.generate(PROMPT, max_tokens=-1, temperature=0, stream=True)
    first = next(stream)
    stream.close()  # returns once the generation stopped
    assert first
    assert kjv.generate(PROMPT, max_tokens=5, temperature=0)  # the context is free again


def test_chat_follows_a_json_schema():
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    with kiln.Model(CHAT_MODEL) as model:
        reply = model.chat(
            [{"role": "user", "content": "Who are you? Answer in JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
            max_tokens=200,
            seed=7,
        )
    assert reply["object"] == "chat.completion"
    choice = reply["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "stop"
    jsonschema.validate(json.loads(choice["message"]["content"]), schema)
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]


def test_embeddings_equal_the_servers():
    texts = ["In the beginning", "the earth was without form, and void"]
    with kiln.Model(CHAT_MODEL) as model:
        ours = model.embed(texts)
    server = subprocess.Popen(
        [KILN_BIN, "serve", "-m", CHAT_MODEL, "--embeddings", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        port = None
        for line in server.stdout:
            m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
            if b"ready" in line:
                break
        assert port, "kiln serve did not say where it listens"
        body = json.dumps({"input": texts}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/embeddings", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            theirs = [d["embedding"] for d in json.load(r)["data"]]
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs):
        assert len(a) == len(b)
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-6


def test_evict_and_restore_give_the_same_text():
    runtime = kiln.Runtime(sim_devices={"sim0": 1 << 30})
    with kiln.Model(DEFAULT_MODEL, device="sim0", runtime=runtime) as model:
        before = model.generate(PROMPT, max_tokens=16, temperature=0)
        model.evict()
        assert not model.resident
        after_evict = model.generate(PROMPT, max_tokens=16, temperature=0)  # brings it back
        model.evict()
        model.restore()
        assert model.resident
        after_restore = model.generate(PROMPT, max_tokens=16, temperature=0)
        owners = [o["owner"] for d in runtime.memory() if d["device"] == "sim0" for o in d["owners"]]
        assert any(model.name in o for o in owners)
    assert before == after_evict == after_restore


def test_a_split_model_generates_the_whole_models_text_and_evicts_per_device():
    runtime = kiln.Runtime(sim_devices={"sim0": 1 << 30, "sim1": 1 << 30})
    with kiln.Model(DEFAULT_MODEL, runtime=runtime) as whole:
        want = whole.generate(PROMPT, max_tokens=16, temperature=0)
    for options in [dict(device="sim0", n_gpu_layers=2), dict(device="sim0,sim1", tensor_split=[1, 3]),
                    dict(device="sim0", override_tensor="ffn_(up|down|gate)=cpu"),
                    dict(device="sim0", no_kv_offload=True)]:
        with kiln.Model(DEFAULT_MODEL, runtime=runtime, **options) as model:
            assert model.generate(PROMPT, max_tokens=16, temperature=0) == want, options
            devices = {d["device"] for d in runtime.memory() for o in d["owners"] if model.name in o["owner"]}
            assert "sim0" in devices and len(devices) >= 2, (options, devices)
            model.evict()
            assert not model.resident
            assert model.generate(PROMPT, max_tokens=16, temperature=0) == want, options
    with pytest.raises(kiln.KilnError, match="not PATTERN=DEVICE"):
        kiln.Model(DEFAULT_MODEL, runtime=runtime, device="sim0", override_tensor="nope")
    with pytest.raises(ValueError):
        kiln.Model(DEFAULT_MODEL, runtime=runtime, split_mode="row")


SIX_LAYERS = os.path.join(os.path.dirname(os.environ["KILN_TEST_MODELS"]), "segmented", "llama-spm-e64-l6.gguf")


def test_a_segmented_model_generates_the_whole_models_text_and_evicts_its_segments():
    roomy = kiln.Runtime(sim_devices={"sim0": 1 << 30})
    with kiln.Model(SIX_LAYERS, runtime=roomy, device="sim0") as whole:
        want = whole.generate(PROMPT, max_tokens=16, temperature=0)
        counted = next(d["counted"] for d in roomy.memory() if d["device"] == "sim0")
    # Room for about four of the six layers (about 200 KB each) beside the rest of the model.
    runtime = kiln.Runtime(sim_devices={"sim0": 1 << 30}, max_mem=f"sim0={(counted - 400_000) / 2**30}")
    with kiln.Model(SIX_LAYERS, runtime=runtime, device="sim0", segmented=True) as model:
        assert model.generate(PROMPT, max_tokens=16, temperature=0) == want

        def segments():
            return [o for d in runtime.memory() if d["device"] == "sim0" for o in d["owners"] if "(layers " in o["owner"]]

        assert len(segments()) >= 3, segments()
        model.evict()
        assert all(o["evicted"] for o in segments()), segments()
        assert model.generate(PROMPT, max_tokens=16, temperature=0) == want


def test_two_runtimes_sharing_an_arbiter_dir_take_turns(tmp_path):
    def side():
        runtime = kiln.Runtime(sim_devices={"sim0": 1 << 30}, arbiter_dir=str(tmp_path), arbiter_timeout=20)
        return runtime, kiln.Model(DEFAULT_MODEL, device="sim0", runtime=runtime)

    (_, a), (_, b) = side(), side()
    with a, b:
        text_a = a.generate(PROMPT, max_tokens=8, temperature=0)  # b yields the device
        assert a.resident and not b.resident
        text_b = b.generate(PROMPT, max_tokens=8, temperature=0)  # a yields it
        assert b.resident and not a.resident
    assert text_a == text_b


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.mark.parametrize("path", [DEFAULT_MODEL, CHAT_MODEL])
def test_tool_calls_are_parsed_as_the_server_parses_them(path):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with kiln.Model(path) as model:
        call = model.parse_chat_output(
            '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}', messages, tools=[WEATHER])
        plain = model.parse_chat_output("It rains.", messages, tools=[WEATHER])
        with pytest.raises(kiln.KilnError, match=r"kiln_model_parse_chat_output: .*tools\[0\]"):
            model.parse_chat_output("x", messages, tools=[{"type": "function"}])
    assert call["content"] is None and len(call["tool_calls"]) == 1
    assert call["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert call["tool_calls"][0]["id"].startswith("call_") and call["tool_calls"][0]["type"] == "function"
    assert plain == {"role": "assistant", "content": "It rains."}


def test_chat_with_tools_prompts_as_the_server():
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with kiln.Model(CHAT_MODEL) as model:
        prompt = kiln._native.read_text(
            "kiln_model_chat_prompt", model._handle, json.dumps({"messages": messages, "tools": [WEATHER]}).encode())
        reply = model.chat(messages, tools=[WEATHER], max_tokens=4, temperature=0)
        assert "get_weather" in prompt and prompt != model.apply_chat_template(messages)
    assert reply["choices"][0]["message"]["role"] == "assistant"


def test_errors_are_exceptions_with_kilns_message(kjv):
    with pytest.raises(kiln.KilnError, match=r"kiln_model_load: .*/no/such/model\.gguf"):
        kiln.Model("/no/such/model.gguf")
    with pytest.raises(kiln.KilnError, match="kiln_sampler_create: json_schema"):
        kjv.generate(PROMPT, json_schema={"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})
    with pytest.raises(kiln.KilnError, match="outside the vocabulary"):
        kjv.detokenize([10**7])
    with pytest.raises(kiln.KilnError, match="max_mem"):
        kiln.Runtime(max_mem="cpu")


def test_two_threads_generate_at_once(kjv):
    prompts = [PROMPT, "And the earth was without form"]
    expected = [kjv.generate(p, max_tokens=24, temperature=0) for p in prompts]
    results = [None, None]

    def work(i):
        results[i] = kjv.generate(prompts[i], max_tokens=24, temperature=0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected


def test_devices_and_memory():
    names = [d["name"] for d in kiln.devices()]
    assert names[0] == "cpu"
    assert all(d["total"] > 0 for d in kiln.devices())
    assert kiln.memory()[0]["device"] == "cpu"


def test_chat_example_runs():
    example = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "python", "chat.py")
    out = subprocess.run([sys.executable, example, CHAT_MODEL, "Hello"], check=True, capture_output=True, timeout=300)
    assert out.stdout.strip()
