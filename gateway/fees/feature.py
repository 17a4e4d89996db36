"""suggestPriorityFee and getPriorityFeeEstimate, as the one list (``gateway/app/features.py``) takes them."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.fees.method import PriorityFeeEstimate, SuggestPriorityFee
from gateway.fees.methods import SPECS
from gateway.pipeline.declaration import Feature, Host, LocalMethod


def _handlers(host: Host) -> Mapping[str, LocalMethod]:
    return {
        "suggestPriorityFee": SuggestPriorityFee(host.upstream),
        "getPriorityFeeEstimate": PriorityFeeEstimate(host.upstream),
    }


FEATURE: Feature[Host] = Feature("fees", methods=SPECS, handlers=_handlers)
