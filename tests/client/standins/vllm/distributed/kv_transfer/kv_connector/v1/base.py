"""Mirrors vllm/distributed/kv_transfer/kv_connector/v1/base.py: what kvledger.vllm_connector subclasses
and is called with. KVConnectorRole (SCHEDULER = 0, WORKER = 1); KVConnectorMetadata (an empty ABC);
KVConnectorBase_V1.__init__(vllm_config, role, kv_cache_config) raising ValueError without a
kv_transfer_config, and its abstract methods: worker side start_load_kv(forward_context, **kwargs),
wait_for_layer_load(layer_name), save_kv_layer(layer_name, kv_layer, attn_metadata, **kwargs),
wait_for_save(); scheduler side get_num_new_matched_tokens(request, num_computed_tokens) ->
(int | None, bool) ("might be called multiple times for a given request"),
update_state_after_alloc(request, blocks, num_external_tokens), build_connector_meta(scheduler_output).
request_finished(request, block_ids) -> (bool, dict | None) is "called exactly once when a request has
finished, before its blocks are freed" (default (False, None))."""
import enum
from abc import ABC, abstractmethod


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata(ABC):  # noqa: B024 - upstream declares it so
    pass


class KVConnectorBase_V1(ABC):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        if vllm_config.kv_transfer_config is None:
            raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
        self._vllm_config = vllm_config
        self._kv_transfer_config = vllm_config.kv_transfer_config
        self._kv_cache_config = kv_cache_config
        self._role = role

    @property
    def role(self):
        return self._role

    @abstractmethod
    def start_load_kv(self, forward_context, **kwargs):
        pass

    @abstractmethod
    def wait_for_layer_load(self, layer_name):
        pass

    @abstractmethod
    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        pass

    @abstractmethod
    def wait_for_save(self):
        pass

    @abstractmethod
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        pass

    @abstractmethod
    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        pass

    @abstractmethod
    def build_connector_meta(self, scheduler_output):
        pass

    def request_finished(self, request, block_ids):
        return False, None
