"""Quotas (issue 42): call rates and day budgets per tenant, agent and tool, counted in Redis
exactly across replicas (`quota_book`), matched to calls (`quota_rules`), refused before any
sandbox is touched (`quota_stage`); docs/governance.md."""

from gateway.quotas.quota_book import QuotaBook, over_quota
from gateway.quotas.quota_rules import WINDOW_MS, CountedLimit, Quotas, counted_limits, matches
from gateway.quotas.quota_stage import QuotaCharge, QuotaStage

__all__ = [
    "WINDOW_MS",
    "CountedLimit",
    "QuotaBook",
    "QuotaCharge",
    "QuotaStage",
    "Quotas",
    "counted_limits",
    "matches",
    "over_quota",
]
