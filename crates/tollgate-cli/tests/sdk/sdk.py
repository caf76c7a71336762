"""What the SDK checks share: the two clients on the gateway, and the asserting calls
both scripts make (a chat, a stream with its usage, in each SDK)."""

import os

import anthropic
import openai

URL = os.environ["TOLLGATE_URL"]
KEY = os.environ["TOLLGATE_KEY"]

oa = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)
an = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=0)


def passed(name):
    print("ok", name, flush=True)


def openai_streamed(model, **extra):
    """Streams a chat of `model` with include_usage; asserts text and usage came."""
    text, usage = "", None
    for chunk in oa.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Stream, please."}],
        stream=True,
        stream_options={"include_usage": True},
        **extra,
    ):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage
    assert text, "no streamed text"
    assert usage is not None and usage.completion_tokens > 0, usage


def anthropic_answered(model):
    """A message of `model`, then the same streamed; asserts text, stop and usage."""
    m = an.messages.create(
        model=model, max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
    )
    assert m.content[0].type == "text" and m.content[0].text, m
    assert m.stop_reason == "end_turn", m
    assert m.usage.output_tokens > 0, m.usage
    with an.messages.stream(
        model=model, max_tokens=64, messages=[{"role": "user", "content": "Stream"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.usage.output_tokens > 0, final
