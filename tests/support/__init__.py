"""The tools the tests share, each written once.

- `daemon`: a real daemon per test (`Harness`, the `lw` fixture);
- `waiting`: polling a condition with a deadline (`wait_for`, and `until` inside an event loop);
- `clock`: a clock a test moves by hand;
- `events`: what a daemon stored about a session (`of_kind`, `rules`);
- `processes`: finding and outliving the processes a test started;
- `model_server`: the HTTP plumbing of the fake model servers (Anthropic, Responses, Gemini);
- `paths`: where the repository, the agent programs and the recordings are;
- `nesting`: deeply nested values built and measured without recursion.
"""
