"""A launched agent's live session, one object per job (live.py says which does what)."""

from .live import LiveSession
from .process import group_alive
from .reader import DRAIN_STALLED
from .sampling import tree_pids
from .spec import Resources, SessionSpec, Sink, minimal_env

__all__ = ["DRAIN_STALLED", "LiveSession", "Resources", "SessionSpec", "Sink", "group_alive", "minimal_env",
           "tree_pids"]
