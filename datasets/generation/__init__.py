"""Generate with AI: test cases written from an agent's configuration, with generated attachments."""
