"""Codex CLI tests: the real binary against a fake Responses API, offline."""
