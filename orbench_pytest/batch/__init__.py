"""The OpenAI Batch API: export, import, submit, wait."""
