// The Vercel AI SDK as a client of `tollgate serve`: `openai(id)` (the Responses API, the
// provider's default) and `anthropic(id)` (Messages), each with generateText, streamText
// and a tool loop (a tool with `execute`, run for several steps under `stopWhen`). Run by
// tests/real_clients.rs with NODE_PATH at the clients' node_modules (scripts/peers.sh
// installs them), TOLLGATE_URL, TOLLGATE_KEY and TOLLGATE_MODEL set. Every check asserts,
// so a failure exits non-zero with its stack; each prints `ok NAME` when it passes.

import assert from "node:assert/strict";
import { createRequire } from "node:module";

// NODE_PATH reaches only require(), so the packages are loaded through it.
const require = createRequire(import.meta.url);
const { generateText, streamText, tool, jsonSchema, stepCountIs } = require("ai");
const { createOpenAI } = require("@ai-sdk/openai");
const { createAnthropic } = require("@ai-sdk/anthropic");

const URL = process.env.TOLLGATE_URL;
const KEY = process.env.TOLLGATE_KEY;
const MODEL = process.env.TOLLGATE_MODEL;

// The documented settings for another server: its base URL (with /v1, as the providers'
// defaults have it) and the key.
const openai = createOpenAI({ baseURL: URL + "/v1", apiKey: KEY });
const anthropic = createAnthropic({ baseURL: URL + "/v1", apiKey: KEY });

const passed = (name) => console.log("ok " + name);

// A tool that records each call, so a check sees that the SDK executed it.
function weatherTool(calls) {
  return tool({
    description: "The weather in a city",
    inputSchema: jsonSchema({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    }),
    execute: async ({ city }) => {
      calls.push(city);
      return { city, forecast: "18C and sunny" };
    },
  });
}

async function generates(name, model) {
  const r = await generateText({ model, prompt: "Why reserve first?", maxRetries: 0 });
  assert.ok(r.text, "no text");
  assert.equal(r.finishReason, "stop");
  assert.ok(r.usage.outputTokens > 0, JSON.stringify(r.usage));
  passed(name);
}

async function streams(name, model) {
  const r = streamText({ model, prompt: "Stream, please.", maxRetries: 0 });
  let text = "";
  for await (const delta of r.textStream) text += delta;
  assert.ok(text, "no streamed text");
  assert.equal(await r.finishReason, "stop");
  assert.ok((await r.usage).outputTokens > 0);
  passed(name);
}

async function toolLoop(name, model) {
  // Whole: the model calls the tool, the SDK executes it and sends its result back, the
  // model answers text.
  const calls = [];
  const r = await generateText({
    model,
    prompt: "What is the weather in Paris?",
    tools: { weather: weatherTool(calls) },
    stopWhen: stepCountIs(4),
    maxRetries: 0,
  });
  assert.ok(calls.length >= 1, "the tool was never executed");
  assert.equal(r.steps.length, 2, JSON.stringify(r.steps.map((s) => s.finishReason)));
  assert.equal(r.steps[0].finishReason, "tool-calls");
  assert.equal(r.steps[0].toolCalls[0].toolName, "weather");
  assert.equal(r.steps[0].toolResults[0].output.forecast, "18C and sunny");
  assert.equal(r.finishReason, "stop");
  assert.ok(r.text, "no final text");
  // Streamed, the same loop.
  const streamed = [];
  const s = streamText({
    model,
    prompt: "And in Oslo?",
    tools: { weather: weatherTool(streamed) },
    stopWhen: stepCountIs(4),
    maxRetries: 0,
  });
  const kinds = new Set();
  for await (const part of s.fullStream) kinds.add(part.type);
  assert.ok(streamed.length >= 1, "the streamed tool was never executed");
  assert.ok(kinds.has("tool-call") && kinds.has("tool-result"), [...kinds].join(","));
  assert.equal((await s.steps).length, 2);
  assert.ok(await s.text, "no final streamed text");
  passed(name);
}

const checks = [
  ["ai_sdk_openai_generate_text", () => generates("ai_sdk_openai_generate_text", openai(MODEL))],
  ["ai_sdk_openai_stream_text", () => streams("ai_sdk_openai_stream_text", openai(MODEL))],
  ["ai_sdk_openai_tool_loop", () => toolLoop("ai_sdk_openai_tool_loop", openai(MODEL))],
  ["ai_sdk_anthropic_generate_text", () => generates("ai_sdk_anthropic_generate_text", anthropic(MODEL))],
  ["ai_sdk_anthropic_stream_text", () => streams("ai_sdk_anthropic_stream_text", anthropic(MODEL))],
  ["ai_sdk_anthropic_tool_loop", () => toolLoop("ai_sdk_anthropic_tool_loop", anthropic(MODEL))],
];
let failed = 0;
for (const [name, check] of checks) {
  try {
    await check();
  } catch (e) {
    failed += 1;
    console.error(`FAILED ${name}:`, e);
  }
}
process.exit(failed ? 1 : 0);
