"""The counters an operator can reset, by name: a module of its own so the command line (`loopwarden reset
--counter`) names them without importing the engine."""

from __future__ import annotations

from typing import Final

# names `reset_counters` (and `loopwarden reset --counter`) accept; each guard's human_reset knows its own
RESETTABLE: Final = frozenset({"repetition", "blocks", "identical_calls", "same_error", "alternation", "monologue",
                               "polling", "validation", "failures", "consecutive_failures", "loop", "loop_counter",
                               "attempts", "iterations", "escalation", "condensation", "rereads", "chanting",
                               "reflections"})
