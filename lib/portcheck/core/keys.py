"""Record keys: out/<module>#<n>[0]:x (a module call's output, in/ its first input) and the model's own name among
its modules. Pure string functions; imports the standard library only."""
import re

ROOT = "(model)"   # the model itself among its modules (compare.py's record keys use it too)
_KEY = re.compile(r"^(out|in)/([^#\[:]*)(#\d+)?(.*)$")  # kind, module, #call, then [index] or :key


def split_key(key: str) -> tuple:
    """A record key out/<module>#<n>[0]:x as (kind, call, rest): ("out", "<module>#<n>", "[0]:x")."""
    kind, module, call, rest = _KEY.match(key).groups()
    return kind, module + (call or ""), rest


def module_of(call: str) -> str:
    return call.split("#")[0]
