"""Mirrors the parts of vllm/config (VllmConfig) the plugin reads: model_config.served_model_name,
cache_config.block_size and num_gpu_blocks (vllm/config/cache.py: None until the engine has profiled
its memory), and kv_transfer_config (None unless --kv-transfer-config is given)."""
from dataclasses import dataclass
from typing import Any


@dataclass
class ModelConfig:
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    served_model_name: Any = None


@dataclass
class CacheConfig:
    block_size: int = 16
    num_gpu_blocks: Any = None


@dataclass
class KVTransferConfig:
    kv_connector: str = "OffloadingConnector"
    kv_role: str = "kv_both"


@dataclass
class VllmConfig:
    model_config: ModelConfig
    cache_config: CacheConfig
    kv_transfer_config: Any = None
