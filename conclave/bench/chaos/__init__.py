"""`conclave bench chaos`: faults on two gateway replicas over a local Redis Cluster."""
