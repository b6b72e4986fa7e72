"""OTLP and plain JSON ingestion of production traces (issue 47): decoding, the GenAI and OpenInference conventions."""
