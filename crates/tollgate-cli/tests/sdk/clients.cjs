// The official OpenAI and Anthropic Node SDKs as clients of `tollgate serve`: run by
// tests/sdk_clients.rs with NODE_PATH at the SDKs (scripts/peers.sh installs them),
// TOLLGATE_URL and TOLLGATE_KEY set. Every check asserts, so a failure exits non-zero
// with its stack; each prints its name when it passes.

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

(async () => {
  await node_openai_chat_and_stream_with_usage();
  await node_anthropic_messages_whole_and_streamed();
  await node_a_wrong_key_is_the_sdks_authentication_error();
  await node_a_wait_past_the_bound_is_the_sdks_rate_limit_error_with_retry_after();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
