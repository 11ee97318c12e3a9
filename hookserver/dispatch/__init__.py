"""The one stage runner behind every hook front door (proxy gRPC, NRI, reconciler).

`dispatcher.py` runs the hooks and applies the failure policy; `learning.py` is what the store learns from a
call; `books.py` the call's audit and metrics; `result.py` what a door gets back.
"""

from hookserver.dispatch.dispatcher import HookDispatcher
from hookserver.dispatch.result import Deferred, DispatchResult, HookRejected

__all__ = ["Deferred", "DispatchResult", "HookDispatcher", "HookRejected"]
