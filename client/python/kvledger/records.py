"""Building kvledger.v1.Record messages from keyword arguments named after the proto fields."""
from kvledger.v1 import record_pb2

_TIERS = {
    "none": record_pb2.TIER_UNSPECIFIED,
    "device": record_pb2.TIER_DEVICE,
    "host": record_pb2.TIER_HOST,
    "disk": record_pb2.TIER_DISK,
    "remote": record_pb2.TIER_REMOTE,
}


def tier_value(tier):
    """A Tier enum value from "device" | "host" | "disk" | "remote" | "none", an enum name
    ("TIER_HOST") or its number."""
    if isinstance(tier, int):
        return tier
    key = str(tier).lower()
    if key in _TIERS:
        return _TIERS[key]
    return record_pb2.Tier.Value(str(tier))


def make_record(**fields):
    """A kvledger.v1.Record from the proto field names (`model`, `tier`, `prompt_tokens`,
    `logical_match_tokens`, `recoverable_tokens`, `recompute_tokens`, `reload_seconds`,
    `suffix_prefill_seconds`, `ttft_seconds`, `request_id`, `state_boundaries` as a dict
    {group: tokens} or a list of StateBoundary). Fields given as None are left unset, which kvledger
    reads as "not measured" (never as 0)."""
    fields = {k: v for k, v in fields.items() if v is not None}
    if "tier" in fields:
        fields["tier"] = tier_value(fields["tier"])
    boundaries = fields.pop("state_boundaries", None)
    record = record_pb2.Record(**fields)
    if isinstance(boundaries, dict):
        for group, tokens in boundaries.items():
            record.state_boundaries.add(state_group=group, boundary_tokens=tokens)
    elif boundaries:
        record.state_boundaries.extend(boundaries)
    return record
