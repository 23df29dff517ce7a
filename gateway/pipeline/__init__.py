"""The six-stage request pipeline: authenticate, scope, authorize, budget, dispatch, account."""

from gateway.pipeline.account import Account
from gateway.pipeline.authenticate import Authenticate
from gateway.pipeline.authorize import Authorize
from gateway.pipeline.budget import Budget, DeadlineClamp, TimeAllocator
from gateway.pipeline.compose import build_pipeline
from gateway.pipeline.context import RequestContext, Stage, trace_of
from gateway.pipeline.dispatch import Dispatch, fit_limits
from gateway.pipeline.pipeline import Pipeline
from gateway.pipeline.scope import Scope

__all__ = [
    "Account",
    "Authenticate",
    "Authorize",
    "Budget",
    "DeadlineClamp",
    "Dispatch",
    "Pipeline",
    "RequestContext",
    "Scope",
    "Stage",
    "TimeAllocator",
    "build_pipeline",
    "fit_limits",
    "trace_of",
]
