"""The event classes as final names, for the type tests the compiled modules make per event.

events.py stays Python (setup.py says why). A compiled module reads a class it imported from a Python module
out of its own dict at every use, a dict lookup per `type(event) is ToolCall`; it reads a final name of a
compiled module (this one) as a C static: `type(event) is TOOL_CALL` is one pointer compare. Annotations and
constructors keep the classes themselves.
"""

from __future__ import annotations

from typing import Final

from . import events as ev

ASSISTANT_MESSAGE: Final = ev.AssistantMessage
ATTEMPT: Final = ev.Attempt
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
