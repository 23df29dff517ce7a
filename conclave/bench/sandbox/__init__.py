"""`conclave bench sandbox`: what a sandboxed call costs, and how fast a cancel ends it."""
