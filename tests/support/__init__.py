"""The tools the tests share, each written once.

- `daemon`: a real daemon per test (`Harness`, the `lw` fixture);
- `waiting`: polling a condition with a deadline (`wait_for`, and `until` inside an event loop);
- `clock`: a clock a test moves by hand;
- `events`: what a daemon stored about a session (`of_kind`, `rules`, `heard`);
- `processes`: finding the processes a test started, and telling when they are gone;
- `scenarios`: checks every launched agent's tests make the same way, and a gate opened on demand;
- `jsonl`: newline-delimited JSON read back;
- `model_server`: the HTTP plumbing of the fake model servers (Anthropic, Responses, Gemini);
- `paths`: where the repository, the agent programs and the recordings are;
- `nesting`: deeply nested values built and measured without recursion.
"""
