"""A small app instrumented by a real OpenTelemetry instrumentation of the `openai` SDK, run in a
process of its own (the instrumentations patch the openai module globally).

It asks the model a question with a tool, the model (the project's fake server, scripted by the
test) calls the tool, the app answers the tool call and the model gives its final answer. Its spans
go out through the SDK's own OTLP/HTTP protobuf exporter. It prints, as one JSON line, what it sent
and received (the messages, the tool call and each response's token usage), for the test to compare
with what Evalsite stored.

    python tests/monitoring/clients/chat_client.py --instrumentation openai-v2 \
        --llm-url http://127.0.0.1:8765/v1 --endpoint http://127.0.0.1:8000/v1/traces --key evi_...
"""

from __future__ import annotations

import argparse
import json
import os

TOOL = {
    "type": "function",
    "function": {
        "name": "get_order_status",
        "description": "The shipping status of an order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}


def _instrument(name: str) -> None:
    if name == "openai-v2":
        # Without these the instrumentation records no message content at all. "true" (its older
        # conventions) is refused by util-genai 1.1b0, and sent the content as log events, not on
        # spans; span_only puts it on the span as gen_ai.input.messages / gen_ai.output.messages.
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    elif name == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

        OpenInferenceInstrumentor().instrument()
    else:
        raise SystemExit(f"unknown instrumentation {name!r}")


def _provider(args: argparse.Namespace):
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    headers = {args.header: (f"Bearer {args.key}" if args.header == "authorization" else args.key)}
    provider = TracerProvider(resource=Resource.create({"service.name": args.service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.endpoint, headers=headers)))
    trace.set_tracer_provider(provider)
    return provider


def _conversation(args: argparse.Namespace) -> dict:
    import openai
    from opentelemetry import trace

    client = openai.OpenAI(base_url=args.llm_url, api_key="test-key", max_retries=0)
    messages: list[dict] = [
        {"role": "system", "content": "You are the support bot of a shop."},
        {"role": "user", "content": args.question},
    ]
    usage = []
    tracer = trace.get_tracer("support-bot")
    # The app's own span around one turn, carrying the session as both conventions name it.
    with tracer.start_as_current_span("support turn") as turn:
        turn.set_attribute("session.id", args.session)
        turn.set_attribute("gen_ai.conversation.id", args.session)
        turn.set_attribute("user.id", "customer-7")
        first = client.chat.completions.create(model="fake-agent", messages=messages, tools=[TOOL])
        usage.append([first.usage.prompt_tokens, first.usage.completion_tokens])
        call = first.choices[0].message.tool_calls[0]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.function.name, "arguments": call.function.arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call.id, "content": args.tool_result})
        second = client.chat.completions.create(model="fake-agent", messages=messages, tools=[TOOL])
        usage.append([second.usage.prompt_tokens, second.usage.completion_tokens])
        trace_id = format(turn.get_span_context().trace_id, "032x")
    return {
        "trace_id": trace_id,
        "messages": messages,
        "answer": second.choices[0].message.content,
        "tool_call": {"id": call.id, "name": call.function.name, "arguments": call.function.arguments},
        "usage": usage,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instrumentation", required=True, choices=["openai-v2", "openinference"])
    parser.add_argument("--llm-url", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--header", default="authorization", choices=["authorization", "x-evalsite-key"])
    parser.add_argument("--service", default="support-bot")
    parser.add_argument("--session", default="session-1")
    parser.add_argument("--question", default="Where is my order A-1042?")
    parser.add_argument("--tool-result", default='{"status": "shipped", "eta": "2 days"}')
    args = parser.parse_args()
    provider = _provider(args)
    _instrument(args.instrumentation)
    sent = _conversation(args)
    provider.shutdown()  # flushes the batch: every span is exported before the process ends
    print(json.dumps(sent))


if __name__ == "__main__":
    main()
