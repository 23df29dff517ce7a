"""What pip said when it failed, in one line: its own ERROR lines.

pip prints WARNING lines first (a configured index or find-links location that does not
exist, say) and its error last ("No matching distribution found for humanzie>=4"); the first
line of its output is therefore often a warning that says nothing of what went wrong.
"""

from __future__ import annotations

MAX_ERRORS = 4  # a resolver conflict can print many; the first ones name the requirement


def pip_error(output: str) -> str:
    """pip's ERROR lines joined by "; ", else its last line (or "no output")."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    if errors:
        return "; ".join(errors[:MAX_ERRORS])
    return lines[-1] if lines else "no output"
