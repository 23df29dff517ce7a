"""`conclave bench a2a` and the A2A agent it (and the tests) put behind the gateway."""
