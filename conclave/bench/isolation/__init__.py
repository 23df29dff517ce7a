"""`conclave bench isolation`: a noisy tenant's attacks, and the hostile upstream."""
