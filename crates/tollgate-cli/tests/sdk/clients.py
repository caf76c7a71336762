"""The official OpenAI and Anthropic Python SDKs as clients of `tollgate serve`.

Run by tests/sdk_clients.rs with TOLLGATE_URL (the gateway's base URL), TOLLGATE_KEY (a
virtual key's secret) set; every check asserts, so a failure exits non-zero with its
traceback. Each check prints its name when it passes.
"""

import json

import anthropic
import openai

from sdk import URL, an, anthropic_answered, oa, openai_streamed, passed

WEATHER = {
    "name": "weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def openai_chat():
    r = oa.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "Why reserve first?"}]
    )
    assert r.choices[0].message.content, r
    assert r.choices[0].finish_reason == "stop", r
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0, r.usage
    passed("openai_chat")


def openai_stream_with_usage():
    openai_streamed("chat")
    passed("openai_stream_with_usage")


# What the simulated model calls: the first declared tool, with the minimal instance of
# its schema (the required `city`, a string: "sim"); after the tool's result, it answers.
CALL_ARGUMENTS = {"city": "sim"}


def openai_tool_call_whole_and_streamed():
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    tools = [{"type": "function", "function": WEATHER}]
    r = oa.chat.completions.create(model="chat", messages=messages, tools=tools)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", r
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id, call
    assert call.function.name == "weather", call
    assert json.loads(call.function.arguments) == CALL_ARGUMENTS, call

    ids, names, arguments, finish = set(), set(), "", None
    for chunk in oa.chat.completions.create(
        model="chat", messages=messages, tools=tools, stream=True
    ):
        if not chunk.choices:
            continue
        for delta in chunk.choices[0].delta.tool_calls or []:
            assert delta.index == 0, delta
            if delta.id:
                ids.add(delta.id)
            if delta.function and delta.function.name:
                names.add(delta.function.name)
            arguments += (delta.function and delta.function.arguments) or ""
        finish = chunk.choices[0].finish_reason or finish
    assert ids == {call.id} and names == {"weather"}, (ids, names)
    assert json.loads(arguments) == CALL_ARGUMENTS, arguments
    assert finish == "tool_calls", finish

    answered = messages + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": call.id, "content": "18C, sunny"},
    ]
    r = oa.chat.completions.create(model="chat", messages=answered, tools=tools)
    assert r.choices[0].finish_reason == "stop" and r.choices[0].message.content, r
    assert not r.choices[0].message.tool_calls, r
    passed("openai_tool_call_whole_and_streamed")


def openai_embeddings():
    r = oa.embeddings.create(model="embed", input=["one", "two"])
    assert [len(d.embedding) for d in r.data] == [8, 8], r
    passed("openai_embeddings")


def anthropic_messages_whole_and_streamed():
    anthropic_answered("chat")
    passed("anthropic_messages_whole_and_streamed")


def anthropic_tool_use_whole_and_streamed():
    tools = [{"name": WEATHER["name"], "description": WEATHER["description"],
              "input_schema": WEATHER["parameters"]}]
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    m = an.messages.create(model="chat", max_tokens=64, tools=tools, messages=messages)
    assert m.stop_reason == "tool_use", m
    [use] = [b for b in m.content if b.type == "tool_use"]
    assert use.id and use.name == "weather", use
    assert use.input == CALL_ARGUMENTS, use

    with an.messages.stream(
        model="chat", max_tokens=64, tools=tools, messages=messages
    ) as stream:
        partial = "".join(
            e.delta.partial_json
            for e in stream
            if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
        )
        final = stream.get_final_message()
    assert json.loads(partial) == CALL_ARGUMENTS, partial
    assert final.stop_reason == "tool_use", final
    [streamed] = [b for b in final.content if b.type == "tool_use"]
    assert (streamed.id, streamed.name) == (use.id, "weather"), streamed
    assert streamed.input == CALL_ARGUMENTS, streamed

    answered = messages + [
        {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id, "content": "18C, sunny"}]},
    ]
    m = an.messages.create(model="chat", max_tokens=64, tools=tools, messages=answered)
    assert m.stop_reason == "end_turn" and m.content[0].type == "text", m
    passed("anthropic_tool_use_whole_and_streamed")


def anthropic_count_tokens():
    tools = [{"name": WEATHER["name"], "description": WEATHER["description"],
              "input_schema": WEATHER["parameters"]}]
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    raw = an.messages.with_raw_response.count_tokens(
        model="chat", system="Be brief.", tools=tools, messages=messages
    )
    # A simulated model: tollgate's estimate, said so in the header.
    assert raw.headers["x-tollgate-token-count"] == "estimate", raw.headers
    counted = raw.parse()
    longer = an.messages.count_tokens(
        model="chat", system="Be brief.", tools=tools,
        messages=messages + [{"role": "assistant", "content": "Which Paris?"},
                             {"role": "user", "content": "The one in France, please."}],
    )
    assert 0 < counted.input_tokens < longer.input_tokens, (counted, longer)
    passed("anthropic_count_tokens")


def a_wrong_key_is_each_sdks_authentication_error():
    try:
        openai.OpenAI(base_url=URL + "/v1", api_key="wrong", max_retries=0).models.list()
        raise AssertionError("openai accepted a wrong key")
    except openai.AuthenticationError:
        pass
    try:
        anthropic.Anthropic(base_url=URL, api_key="wrong", max_retries=0).messages.create(
            model="chat", max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
        raise AssertionError("anthropic accepted a wrong key")
    except anthropic.AuthenticationError:
        pass
    passed("a_wrong_key_is_each_sdks_authentication_error")


def a_body_over_the_cap_is_a_413():
    big = "x" * 20_000
    try:
        oa.chat.completions.create(model="chat", messages=[{"role": "user", "content": big}])
        raise AssertionError("openai: a body over the cap was accepted")
    except openai.APIStatusError as e:
        assert e.status_code == 413, e
    try:
        an.messages.create(model="chat", max_tokens=8, messages=[{"role": "user", "content": big}])
        raise AssertionError("anthropic: a body over the cap was accepted")
    except anthropic.APIStatusError as e:
        assert e.status_code == 413, e
    passed("a_body_over_the_cap_is_a_413")


def a_wait_past_the_bound_is_each_sdks_rate_limit_error_with_retry_after():
    # `slow` allows one request a minute: the first goes, the next would wait ~60 s.
    oa.chat.completions.create(model="slow", messages=[{"role": "user", "content": "1"}])
    bound = {"x-tollgate-max-wait-ms": "0"}
    try:
        oa.chat.completions.create(
            model="slow", messages=[{"role": "user", "content": "2"}], extra_headers=bound
        )
        raise AssertionError("openai: no 429")
    except openai.RateLimitError as e:
        wait = int(e.response.headers["retry-after"])
        assert 1 <= wait <= 60, wait
    try:
        an.messages.create(
            model="slow", max_tokens=8, messages=[{"role": "user", "content": "3"}],
            extra_headers=bound,
        )
        raise AssertionError("anthropic: no 429")
    except anthropic.RateLimitError as e:
        wait = int(e.response.headers["retry-after"])
        assert 1 <= wait <= 60, wait
    passed("a_wait_past_the_bound_is_each_sdks_rate_limit_error_with_retry_after")


def openai_responses_whole_streamed_and_a_tool_loop():
    r = oa.responses.create(model="chat", input="Why reserve first?", instructions="Be brief.")
    assert r.status == "completed" and r.output_text, r
    assert r.usage.output_tokens > 0 and r.usage.input_tokens > 0, r.usage

    # The SDK's stream helper insists on `response.created` first and items opened
    # before their deltas; its final response must hold what the deltas said.
    with oa.responses.stream(model="chat", input="Stream, please.") as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text and final.output_text == text, (text, final)

    tools = [{"type": "function", **WEATHER}]
    question = [{"role": "user", "content": "Weather in Paris?"}]
    r = oa.responses.create(model="chat", input=question, tools=tools, tool_choice="required")
    [call] = [i for i in r.output if i.type == "function_call"]
    assert call.name == "weather" and call.call_id, call
    assert json.loads(call.arguments) == CALL_ARGUMENTS, call
    with oa.responses.stream(model="chat", input=question, tools=tools) as stream:
        final = stream.get_final_response()
    [streamed] = [i for i in final.output if i.type == "function_call"]
    assert json.loads(streamed.arguments) == CALL_ARGUMENTS, streamed

    replay = question + [i.model_dump(exclude_none=True) for i in r.output]
    replay.append({"type": "function_call_output", "call_id": call.call_id, "output": "18C"})
    r = oa.responses.create(model="chat", input=replay, tools=tools)
    assert r.status == "completed" and r.output_text, r
    assert not [i for i in r.output if i.type == "function_call"], r

    try:
        oa.responses.create(model="chat", input="again", previous_response_id=r.id)
        raise AssertionError("previous_response_id was not refused")
    except openai.BadRequestError as e:
        assert e.code == "previous_response_not_found", e.body
        assert e.param == "previous_response_id", e.body
    passed("openai_responses_whole_streamed_and_a_tool_loop")


for check in (
    openai_chat,
    openai_stream_with_usage,
    openai_tool_call_whole_and_streamed,
    openai_embeddings,
    openai_responses_whole_streamed_and_a_tool_loop,
    anthropic_messages_whole_and_streamed,
    anthropic_tool_use_whole_and_streamed,
    anthropic_count_tokens,
    a_wrong_key_is_each_sdks_authentication_error,
    a_body_over_the_cap_is_a_413,
    a_wait_past_the_bound_is_each_sdks_rate_limit_error_with_retry_after,
):
    check()
