"""Chat over a model with a template: stories260K re-written (with the gguf
package) with a tokenizer.chat_template added."""

import pytest

import moonlm

gguf = pytest.importorskip("gguf", reason="the gguf package writes the test model")

TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
MESSAGES = [
    {"role": "system", "content": "Tell a story."},
    {"role": "user", "content": "Once upon a time"},
]
RENDERED = "system: Tell a story.\nuser: Once upon a time\nassistant:"


def copy_with_template(src, dst, template):
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(str(dst), arch=r.fields["general.architecture"].contents())
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # written by the writer itself
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(key, f.contents(), f.types[0])
    w.add_key_value("tokenizer.chat_template", template, gguf.GGUFValueType.STRING)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def chat_model(stories_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("chat") / "stories-chat.gguf"
    copy_with_template(stories_path, path, TEMPLATE)
    with moonlm.Model(path, n_threads=2) as m:
        yield m


def test_template_property_and_rendering(chat_model):
    assert chat_model.chat_template == TEMPLATE
    assert chat_model.apply_chat_template(MESSAGES) == RENDERED
    assert chat_model.apply_chat_template(MESSAGES, add_assistant=False) == RENDERED[: -len("assistant:")]


def test_chat_is_generation_from_the_rendered_prompt(chat_model, model):
    reply = chat_model.chat(MESSAGES, max_tokens=24, temperature=0)
    # The copy has the same weights and vocabulary as stories260K itself.
    want = model.generate(RENDERED, max_tokens=24, temperature=0, parse_special=True)
    assert reply == want != ""


def test_chat_streaming_equals_non_streaming(chat_model):
    opts = dict(max_tokens=24, temperature=0.7, seed=11)
    full = chat_model.chat(MESSAGES, **opts)
    pieces = list(chat_model.chat(MESSAGES, stream=True, **opts))
    assert "".join(pieces) == full
    assert len(pieces) > 1


def test_chat_message_content_may_be_none(chat_model):
    assert chat_model.apply_chat_template([{"role": "user", "content": None}]) == "user: \nassistant:"


# A model without a chat template (stories260K, like the base Gemma 3 270M):
# one behaviour, the library's: UnsupportedError naming the built-in
# formats, unless template= names one.


def test_builtin_chat_templates_list():
    names = moonlm.builtin_chat_templates()
    assert "chatml" in names and "gemma" in names and "llama3" in names
    assert names == sorted(names)


def test_no_template_is_unsupported_naming_the_builtins(model):
    assert model.chat_template is None
    for call in (
        lambda: model.apply_chat_template(MESSAGES),
        lambda: model.chat(MESSAGES, max_tokens=4),
    ):
        with pytest.raises(moonlm.UnsupportedError) as e:
            call()
        msg = str(e.value)
        assert "no chat template" in msg
        assert 'template="NAME"' in msg
        for name in moonlm.builtin_chat_templates():
            assert name in msg


def test_named_template_without_model_template(model):
    text = model.apply_chat_template(MESSAGES, template="chatml")
    assert text == (
        "<|im_start|>system\nTell a story.<|im_end|>\n"
        "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n"
    )
    assert model.apply_chat_template(MESSAGES, add_assistant=False, template="chatml") == text[: -len("<|im_start|>assistant\n")]
    for name in moonlm.builtin_chat_templates():
        assert "Once upon a time" in model.apply_chat_template(MESSAGES, template=name)
    reply = model.chat(MESSAGES, max_tokens=8, temperature=0, template="chatml")
    want = model.generate(text, max_tokens=8, temperature=0, parse_special=True)
    assert reply == want


def test_named_template_overrides_the_model_template(chat_model):
    assert chat_model.apply_chat_template(MESSAGES, template=None) == RENDERED
    assert chat_model.apply_chat_template(MESSAGES, template="").startswith("system: ")
    assert chat_model.apply_chat_template(MESSAGES, template="zephyr").startswith("<|system|>\nTell a story.")


def test_bad_template_names(model):
    with pytest.raises(moonlm.InvalidArgumentError) as e:
        model.apply_chat_template(MESSAGES, template="ChatML")
    assert '"ChatML"' in str(e.value) and "chatml" in str(e.value)
    with pytest.raises(moonlm.InvalidArgumentError):
        model.chat(MESSAGES, template="nope")
    with pytest.raises(moonlm.InvalidArgumentError):
        model.apply_chat_template(MESSAGES, template="chat\0ml")
    with pytest.raises(moonlm.InvalidArgumentError):
        model.apply_chat_template(MESSAGES, template=3)
