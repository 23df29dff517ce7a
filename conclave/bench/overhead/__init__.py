"""What the gateway costs and carries: `conclave bench gateway`, `scale`, `tracing` and
`console`, with the ceiling app and the OTLP receiver they measure against."""
