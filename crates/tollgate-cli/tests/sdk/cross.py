"""The official SDKs calling models of the other dialect through `tollgate serve`, with
llmock (a third-party mock of both APIs) behind: the OpenAI SDK asks a model whose
provider is `anthropic-direct`, the Anthropic SDK one whose provider is
`openai-compatible`.

Run by tests/sdk_clients.rs with TOLLGATE_URL and TOLLGATE_KEY set; every check asserts
and prints its name when it passes.
"""

import os

import anthropic
import openai

URL = os.environ["TOLLGATE_URL"]
KEY = os.environ["TOLLGATE_KEY"]

oa = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)
an = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=0)


def passed(name):
    print("ok", name, flush=True)


def openai_sdk_chats_with_an_anthropic_model():
    r = oa.chat.completions.create(
        model="claude", max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
    )
    assert r.choices[0].message.content, r
    assert r.choices[0].finish_reason == "stop", r
    assert r.usage.completion_tokens > 0, r.usage
    text, usage = "", None
    for chunk in oa.chat.completions.create(
        model="claude",
        max_tokens=64,
        messages=[{"role": "user", "content": "Stream, please."}],
        stream=True,
        stream_options={"include_usage": True},
    ):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage
    assert text and usage is not None and usage.completion_tokens > 0, (text, usage)
    passed("openai_sdk_chats_with_an_anthropic_model")


def openai_sdk_gets_length_for_an_answer_cut_off_at_its_max_tokens():
    # llmock's Anthropic route stops at 8 tokens with stop_reason max_tokens.
    r = oa.chat.completions.create(
        model="claude", max_tokens=8,
        messages=[{"role": "user", "content": "A long answer, please."}],
    )
    assert r.choices[0].finish_reason == "length", r
    passed("openai_sdk_gets_length_for_an_answer_cut_off_at_its_max_tokens")


def anthropic_sdk_messages_an_openai_model():
    m = an.messages.create(
        model="gpt", max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
    )
    assert m.content[0].type == "text" and m.content[0].text, m
    assert m.stop_reason == "end_turn", m
    assert m.usage.output_tokens > 0, m.usage
    with an.messages.stream(
        model="gpt", max_tokens=64, messages=[{"role": "user", "content": "Stream"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.usage.output_tokens > 0, final
    passed("anthropic_sdk_messages_an_openai_model")


for check in (
    openai_sdk_chats_with_an_anthropic_model,
    openai_sdk_gets_length_for_an_answer_cut_off_at_its_max_tokens,
    anthropic_sdk_messages_an_openai_model,
):
    check()
