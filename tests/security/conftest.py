"""The hostile-tenant suites (issue 13): each attack runs against a real stack and checks the
exact refusal the attacker gets and that the victim tenant's calls are unaffected."""
