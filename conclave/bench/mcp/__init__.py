"""MCP through Conclave: `conclave bench federation` and `conclave bench conformance`, with the
upstream server, the official conformance suite's runner and the token proxy."""
