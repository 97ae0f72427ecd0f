"""Mirrors vllm/v1/kv_cache_interface.py KVCacheConfig, as KVConnectorBase_V1.__init__ receives it: the
blocks the engine allocated (num_blocks, the null block among them) and its KV cache groups."""
from dataclasses import dataclass, field


@dataclass
class KVCacheConfig:
    num_blocks: int
    kv_cache_tensors: list = field(default_factory=list)
    kv_cache_groups: list = field(default_factory=list)
