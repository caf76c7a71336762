"""The official SDKs calling models of the other dialect through `tollgate serve`, with
llmock (a third-party mock of both APIs) behind: the OpenAI SDK asks a model whose
provider is `anthropic-direct`, the Anthropic SDK one whose provider is
`openai-compatible`.

Run by tests/sdk_clients.rs with TOLLGATE_URL and TOLLGATE_KEY set; every check asserts
and prints its name when it passes.
"""

from sdk import anthropic_answered, oa, openai_streamed, passed


def openai_sdk_chats_with_an_anthropic_model():
    r = oa.chat.completions.create(
        model="claude", max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
    )
    assert r.choices[0].message.content, r
    assert r.choices[0].finish_reason == "stop", r
    assert r.usage.completion_tokens > 0, r.usage
    openai_streamed("claude", max_tokens=64)
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
    anthropic_answered("gpt")
    passed("anthropic_sdk_messages_an_openai_model")


for check in (
    openai_sdk_chats_with_an_anthropic_model,
    openai_sdk_gets_length_for_an_answer_cut_off_at_its_max_tokens,
    anthropic_sdk_messages_an_openai_model,
):
    check()
