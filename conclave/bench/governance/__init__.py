"""`conclave bench governance`: what policy rules cost a call, how quickly an approval
releases a held call across replicas, and whether quotas hold exactly across replicas."""
