"""`conclave bench budgets` and `conclave bench errors`: recovering under deadlines and
failures, on one gateway with the fault tools."""
