"""Building kvledger.v1.Record messages from keyword arguments named after the proto fields."""
from kvledger.v1 import record_pb2


def tier_value(tier):
    """A Tier enum value from its label ("device", "host", "disk", "remote", "mixed", "unknown", or
    "none" for a miss: the tier="..." label values of kvledger's series), an enum name
    ("TIER_HOST") or its number. The labels are the enum names without TIER_, so the proto is the
    one list."""
    if isinstance(tier, int):
        return tier
    key = str(tier)
    if key.lower() == "none":
        return record_pb2.TIER_UNSPECIFIED
    name = key if key.startswith("TIER_") else "TIER_" + key.upper()
    return record_pb2.Tier.Value(name)


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
