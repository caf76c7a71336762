"""The OpenAI Agents SDK on its default model setup (the Responses API through an
AsyncOpenAI client) as a client of `tollgate serve`: an agent with one function tool,
run to its final output. Run by tests/real_clients.rs with the Agents SDK's venv,
TOLLGATE_URL, TOLLGATE_KEY and TOLLGATE_MODEL set; prints `ok NAME` per passed check."""

import asyncio
import os

from agents import (
    Agent,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from agents.items import ToolCallItem, ToolCallOutputItem
from openai import AsyncOpenAI

URL = os.environ["TOLLGATE_URL"]
KEY = os.environ["TOLLGATE_KEY"]
MODEL = os.environ["TOLLGATE_MODEL"]

# The documented way to point the SDK at another OpenAI-compatible server: a default
# client with its base URL and key. The default API stays the Responses API. Tracing
# would export spans to OpenAI's servers; it is turned off (the environment sets
# OPENAI_AGENTS_DISABLE_TRACING too).
set_default_openai_client(AsyncOpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0))
set_tracing_disabled(True)

CALLS = []


@function_tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    CALLS.append(city)
    return f"18C and sunny in {city}"


async def agents_sdk_runs_an_agent_with_a_function_tool_to_its_final_output():
    agent = Agent(
        name="Forecaster",
        instructions="Answer with the weather tool.",
        model=MODEL,
        tools=[weather],
    )
    result = await Runner.run(agent, "What is the weather in Paris?")
    assert CALLS, "the tool was never called"
    calls = [i for i in result.new_items if isinstance(i, ToolCallItem)]
    outputs = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert calls and calls[0].raw_item.name == "weather", result.new_items
    assert outputs and "18C" in str(outputs[0].output), result.new_items
    assert isinstance(result.final_output, str) and result.final_output, result
    # Two model calls: the tool call, then the answer to its result.
    assert len(result.raw_responses) == 2, result.raw_responses
    print("ok agents_sdk_runs_an_agent_with_a_function_tool_to_its_final_output", flush=True)


async def agents_sdk_streams_an_agent_run_with_a_function_tool():
    CALLS.clear()
    agent = Agent(name="Forecaster", model=MODEL, tools=[weather])
    run = Runner.run_streamed(agent, "Weather in Oslo?")
    kinds = []
    async for event in run.stream_events():
        if event.type == "run_item_stream_event":
            kinds.append(event.item.type)
    assert CALLS, "the tool was never called"
    assert "tool_call_item" in kinds and "tool_call_output_item" in kinds, kinds
    assert "message_output_item" in kinds, kinds
    assert isinstance(run.final_output, str) and run.final_output, run
    print("ok agents_sdk_streams_an_agent_run_with_a_function_tool", flush=True)


async def main():
    await agents_sdk_runs_an_agent_with_a_function_tool_to_its_final_output()
    await agents_sdk_streams_an_agent_run_with_a_function_tool()


asyncio.run(main())
