"""The six-stage request pipeline: authenticate, scope, authorize, budget, dispatch, account.

One stage a module, each numbered in its docstring; `gateway.assembly` composes them once.
"""

from gateway.pipeline.account import AccountStage
from gateway.pipeline.authenticate import AuthenticateStage
from gateway.pipeline.authorize import AuthorizeStage, allowed_specs, find_tool
from gateway.pipeline.body_rate import BodyRate
from gateway.pipeline.budget import BudgetStage, DeadlineClamp, TimeAllocator
from gateway.pipeline.context import RequestContext, Stage, trace_of
from gateway.pipeline.dispatch import DispatchStage, fit_limits
from gateway.pipeline.header_check import HeaderCheck
from gateway.pipeline.local_buckets import LocalBuckets
from gateway.pipeline.pipeline import Pipeline
from gateway.pipeline.scope import ScopeStage

__all__ = [
    "AccountStage",
    "AuthenticateStage",
    "AuthorizeStage",
    "BodyRate",
    "BudgetStage",
    "DeadlineClamp",
    "DispatchStage",
    "HeaderCheck",
    "LocalBuckets",
    "Pipeline",
    "RequestContext",
    "ScopeStage",
    "Stage",
    "TimeAllocator",
    "allowed_specs",
    "find_tool",
    "fit_limits",
    "trace_of",
]
