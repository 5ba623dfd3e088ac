"""Tests of the ACP adapter (any Agent Client Protocol agent)."""
