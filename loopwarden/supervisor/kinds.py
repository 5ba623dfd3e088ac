"""The event classes as final names, for the type tests the compiled modules make per event.

Plain Python would test `isinstance(event, ToolCall)`; the compiled build (LOOPWARDEN_COMPILE=1, setup.py) is why
the engine writes `type(event) is kinds.TOOL_CALL`, and why its module constants are `Final`. events.py stays
Python (setup.py says why), and a compiled module reads a name imported from a Python module, or a module constant
not declared Final, out of its module's dict at every use; a Final name of a compiled module (this one) is a C
static, and `type(event) is TOOL_CALL` one pointer compare, which mypy narrows as it does isinstance (the event
classes have no subclasses: both tests answer alike). Measured by callgrind, compiled, isinstance with the
classes of events.py costs 36,100 instructions per line of bench/flood_path.py's flood against 32,600 (+11 %),
and 37,200 per replayed event against 34,200 (+9 %). Compiled code holds a Final's value, so a test never patches
a module constant: the code takes what a test needs to change as a parameter (Recorder's flush_seconds and
pending_cap), or exposes the path it compares with (chanting's maybe_chanting_by_loop). Annotations and
constructors keep the classes themselves.
"""

from __future__ import annotations

from typing import Final

from . import events as ev

ASSISTANT_MESSAGE: Final = ev.AssistantMessage
ATTEMPT: Final = ev.Attempt
COLLABORATION: Final = ev.Collaboration
DONE: Final = ev.Done
ERROR: Final = ev.Error
GATE_REQUEST: Final = ev.GateRequest
HELLO: Final = ev.Hello
INVALID_LINE: Final = ev.InvalidLine
ITERATION: Final = ev.Iteration
OUTPUT: Final = ev.Output
RESOURCE_SAMPLE: Final = ev.ResourceSample
TEST_RESULT: Final = ev.TestResult
TOOL_CALL: Final = ev.ToolCall
TOOL_RESULT: Final = ev.ToolResult
USAGE: Final = ev.Usage
USER_MESSAGE: Final = ev.UserMessage
VALIDATION_ERROR: Final = ev.ValidationError
