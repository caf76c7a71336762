// The official OpenAI and Anthropic Node SDKs as clients of `tollgate serve` (chat, streams,
// tool calls whole and streamed, Anthropic's count_tokens, a wrong key, a wait past the
// bound): run by tests/sdk_clients.rs with NODE_PATH at the SDKs (scripts/peers.sh
// installs them), TOLLGATE_URL and TOLLGATE_KEY set. Every check asserts, so a failure
// exits non-zero with its stack; each prints its name when it passes.

const assert = require("node:assert/strict");
const { OpenAI, AuthenticationError, RateLimitError } = require("openai");
const { Anthropic } = require("@anthropic-ai/sdk");

const URL = process.env.TOLLGATE_URL;
const KEY = process.env.TOLLGATE_KEY;
const oa = new OpenAI({ baseURL: URL + "/v1", apiKey: KEY, maxRetries: 0 });
const an = new Anthropic({ baseURL: URL, apiKey: KEY, maxRetries: 0 });

const passed = (name) => console.log("ok " + name);

async function node_openai_chat_and_stream_with_usage() {
  const r = await oa.chat.completions.create({
    model: "chat",
    messages: [{ role: "user", content: "Why reserve first?" }],
  });
  assert.ok(r.choices[0].message.content);
  assert.equal(r.choices[0].finish_reason, "stop");
  let text = "";
  let usage = null;
  const stream = await oa.chat.completions.create({
    model: "chat",
    messages: [{ role: "user", content: "Stream, please." }],
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    if (chunk.choices.length) text += chunk.choices[0].delta.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(text, "no streamed text");
  assert.ok(usage && usage.completion_tokens > 0, JSON.stringify(usage));
  passed("node_openai_chat_and_stream_with_usage");
}

async function node_anthropic_messages_whole_and_streamed() {
  const m = await an.messages.create({
    model: "chat",
    max_tokens: 64,
    messages: [{ role: "user", content: "Hello" }],
  });
  assert.equal(m.content[0].type, "text");
  assert.equal(m.stop_reason, "end_turn");
  const stream = an.messages.stream({
    model: "chat",
    max_tokens: 64,
    messages: [{ role: "user", content: "Stream" }],
  });
  let text = "";
  stream.on("text", (t) => (text += t));
  const final = await stream.finalMessage();
  assert.ok(text && final.usage.output_tokens > 0);
  passed("node_anthropic_messages_whole_and_streamed");
}

// The tool both dialects declare; the simulated model calls the first declared tool
// with the minimal instance of its schema (the required `city`: "sim").
const WEATHER = {
  name: "weather",
  description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  },
};
const CALL_ARGUMENTS = { city: "sim" };

async function node_openai_tool_call_whole_and_streamed() {
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  const tools = [{ type: "function", function: WEATHER }];
  const r = await oa.chat.completions.create({ model: "chat", messages, tools });
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  const calls = r.choices[0].message.tool_calls;
  assert.equal(calls.length, 1, JSON.stringify(calls));
  const call = calls[0];
  assert.ok(call.id);
  assert.equal(call.function.name, "weather");
  assert.deepEqual(JSON.parse(call.function.arguments), CALL_ARGUMENTS);

  const stream = await oa.chat.completions.create({ model: "chat", messages, tools, stream: true });
  const ids = new Set();
  const names = new Set();
  let args = "";
  let finish = null;
  for await (const chunk of stream) {
    if (!chunk.choices.length) continue;
    for (const d of chunk.choices[0].delta.tool_calls ?? []) {
      assert.equal(d.index, 0);
      if (d.id) ids.add(d.id);
      if (d.function?.name) names.add(d.function.name);
      args += d.function?.arguments ?? "";
    }
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.deepEqual([...ids], [call.id]);
  assert.deepEqual([...names], ["weather"]);
  assert.deepEqual(JSON.parse(args), CALL_ARGUMENTS);
  assert.equal(finish, "tool_calls");

  const answered = await oa.chat.completions.create({
    model: "chat",
    tools,
    messages: [
      ...messages,
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "18C, sunny" },
    ],
  });
  assert.equal(answered.choices[0].finish_reason, "stop");
  assert.ok(answered.choices[0].message.content);
  passed("node_openai_tool_call_whole_and_streamed");
}

async function node_anthropic_tool_use_whole_and_streamed() {
  const tools = [
    { name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters },
  ];
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  const m = await an.messages.create({ model: "chat", max_tokens: 64, tools, messages });
  assert.equal(m.stop_reason, "tool_use");
  const uses = m.content.filter((b) => b.type === "tool_use");
  assert.equal(uses.length, 1, JSON.stringify(m.content));
  const use = uses[0];
  assert.ok(use.id);
  assert.equal(use.name, "weather");
  assert.deepEqual(use.input, CALL_ARGUMENTS);

  const stream = an.messages.stream({ model: "chat", max_tokens: 64, tools, messages });
  let partial = "";
  stream.on("inputJson", (delta) => (partial += delta));
  const final = await stream.finalMessage();
  assert.deepEqual(JSON.parse(partial), CALL_ARGUMENTS);
  assert.equal(final.stop_reason, "tool_use");
  const streamed = final.content.find((b) => b.type === "tool_use");
  assert.equal(streamed.id, use.id);
  assert.equal(streamed.name, "weather");
  assert.deepEqual(streamed.input, CALL_ARGUMENTS);

  const answered = await an.messages.create({
    model: "chat",
    max_tokens: 64,
    tools,
    messages: [
      ...messages,
      { role: "assistant", content: [use] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18C, sunny" }] },
    ],
  });
  assert.equal(answered.stop_reason, "end_turn");
  assert.equal(answered.content[0].type, "text");
  passed("node_anthropic_tool_use_whole_and_streamed");
}

async function node_a_wrong_key_is_the_sdks_authentication_error() {
  const wrong = new OpenAI({ baseURL: URL + "/v1", apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrong.models.list(), AuthenticationError);
  passed("node_a_wrong_key_is_the_sdks_authentication_error");
}

async function node_a_wait_past_the_bound_is_the_sdks_rate_limit_error_with_retry_after() {
  // `slow` allows one request a minute: the first goes, the next would wait ~60 s.
  await oa.chat.completions.create({ model: "slow", messages: [{ role: "user", content: "1" }] });
  const bounded = { headers: { "x-tollgate-max-wait-ms": "0" } };
  try {
    await oa.chat.completions.create(
      { model: "slow", messages: [{ role: "user", content: "2" }] },
      bounded,
    );
    assert.fail("no 429");
  } catch (e) {
    assert.ok(e instanceof RateLimitError, String(e));
    const wait = Number(e.headers.get("retry-after"));
    assert.ok(wait >= 1 && wait <= 60, String(wait));
  }
  passed("node_a_wait_past_the_bound_is_the_sdks_rate_limit_error_with_retry_after");
}

async function node_openai_responses_whole_streamed_and_a_tool_loop() {
  const r = await oa.responses.create({ model: "chat", input: "Why reserve first?" });
  assert.equal(r.status, "completed");
  assert.ok(r.output_text, JSON.stringify(r));
  let text = "";
  const stream = oa.responses.stream({ model: "chat", input: "Stream, please." });
  stream.on("response.output_text.delta", (e) => (text += e.delta));
  const final = await stream.finalResponse();
  assert.ok(text);
  assert.equal(final.output_text, text);
  const tools = [
    {
      type: "function",
      name: "weather",
      description: "The weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
      },
    },
  ];
  const question = [{ role: "user", content: "Weather in Paris?" }];
  const called = await oa.responses.create({ model: "chat", input: question, tools });
  const calls = called.output.filter((i) => i.type === "function_call");
  assert.equal(calls.length, 1, JSON.stringify(called.output));
  assert.equal(calls[0].name, "weather");
  assert.deepEqual(JSON.parse(calls[0].arguments), { city: "sim" });
  const answered = await oa.responses.create({
    model: "chat",
    tools,
    input: [
      ...question,
      ...called.output,
      { type: "function_call_output", call_id: calls[0].call_id, output: "18C" },
    ],
  });
  assert.equal(answered.status, "completed");
  assert.ok(answered.output_text);
  passed("node_openai_responses_whole_streamed_and_a_tool_loop");
}

async function node_anthropic_count_tokens() {
  const messages = [{ role: "user", content: "Weather in Paris?" }];
  const { data, response } = await an.messages
    .countTokens({ model: "chat", system: "Be brief.", messages })
    .withResponse();
  // A simulated model: tollgate's estimate, said so in the header.
  assert.equal(response.headers.get("x-tollgate-token-count"), "estimate");
  const longer = await an.messages.countTokens({
    model: "chat",
    system: "Be brief.",
    messages: messages.concat([
      { role: "assistant", content: "Which Paris?" },
      { role: "user", content: "The one in France, please." },
    ]),
  });
  assert.ok(
    data.input_tokens > 0 && data.input_tokens < longer.input_tokens,
    JSON.stringify([data, longer]),
  );
  passed("node_anthropic_count_tokens");
}

(async () => {
  await node_openai_chat_and_stream_with_usage();
  await node_anthropic_messages_whole_and_streamed();
  await node_openai_tool_call_whole_and_streamed();
  await node_openai_responses_whole_streamed_and_a_tool_loop();
  await node_anthropic_tool_use_whole_and_streamed();
  await node_anthropic_count_tokens();
  await node_a_wrong_key_is_the_sdks_authentication_error();
  await node_a_wait_past_the_bound_is_the_sdks_rate_limit_error_with_retry_after();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
