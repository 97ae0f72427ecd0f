"""Stand-in for vllm/distributed/kv_events.py: the KV cache events and ZmqEventPublisher's wire
format, which kvledger.kv_events reads. Mirrors (read at two upstream versions):
- EventBatch(ts, events, data_parallel_rank=None), KVCacheEvent tagged by class name;
  BlockStored(block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name,
  extra_keys=None, group_idx=None, ...), BlockRemoved(block_hashes, medium, group_idx=None),
  AllBlocksCleared(). msgspec encodes a Struct with array_like=True (older vLLM, and SGLang's copy)
  as an array, the tag first; without it (newer vLLM) as a map with the tag under "type";
  omit_defaults drops fields still at their default. vLLM's msgspec is not packaged here: this
  encodes the same msgpack with python3-msgpack.
- ZmqEventPublisher: a PUB socket sending (topic, seq as 8 bytes big-endian, payload) per batch,
  seq counting from 0; a ROUTER replay socket answering (identity, b"", start seq) with
  (identity, b"", seq, payload) for every buffered batch from start, then (identity, b"", -1, b"").
"""
import time

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)


def block_stored(block_hashes, parent_block_hash, token_ids, block_size, medium="GPU", array_like=False):
    if array_like:  # older vLLM: BlockStored(block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium)
        return ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, None, medium]
    return {"type": "BlockStored", "block_hashes": block_hashes, "parent_block_hash": parent_block_hash,
            "token_ids": token_ids, "block_size": block_size, "lora_id": None, "medium": medium, "lora_name": None}


def block_removed(block_hashes, medium="GPU", array_like=False):
    if array_like:
        return ["BlockRemoved", block_hashes, medium]
    return {"type": "BlockRemoved", "block_hashes": block_hashes, "medium": medium}


def all_blocks_cleared(array_like=False):
    return ["AllBlocksCleared"] if array_like else {"type": "AllBlocksCleared"}


def event_batch(events, array_like=False, data_parallel_rank=0):
    if array_like:
        return msgpack.packb([time.time(), events])
    return msgpack.packb({"ts": time.time(), "events": events, "data_parallel_rank": data_parallel_rank})


class ZmqEventPublisher:
    """PUB + ROUTER replay, as upstream; publish() sends at once (upstream queues to a thread) and
    service_replay() answers one pending replay request (upstream polls it in its thread)."""

    def __init__(self, endpoint, replay_endpoint=None, topic="", buffer_steps=10_000):
        self._ctx = zmq.Context.instance()
        self._pub = self._ctx.socket(zmq.PUB)
        self._pub.bind(endpoint)
        self._replay = None
        if replay_endpoint:
            self._replay = self._ctx.socket(zmq.ROUTER)
            self._replay.bind(replay_endpoint)
        self._topic = topic.encode()
        self._seq = 0
        self._buffer = []
        self._buffer_steps = buffer_steps

    def endpoint(self):
        return self._pub.getsockopt(zmq.LAST_ENDPOINT).decode()

    def replay_endpoint(self):
        return self._replay.getsockopt(zmq.LAST_ENDPOINT).decode()

    def publish(self, payload, send=True):
        """Sends one encoded batch with the next sequence number (send=False: buffered for replay
        only, as a batch the PUB socket dropped would be)."""
        seq, self._seq = self._seq, self._seq + 1
        if send:
            self._pub.send_multipart((self._topic, seq.to_bytes(8, "big"), payload))
        self._buffer = (self._buffer + [(seq, payload)])[-self._buffer_steps:]

    def send_raw(self, frames):
        self._pub.send_multipart(frames)

    def restart(self):
        """An engine restart: the sequence starts at 0 again, the buffer is empty."""
        self._seq, self._buffer = 0, []

    def service_replay(self, timeout_ms=5000):
        if self._replay is None or not self._replay.poll(timeout_ms):
            return False
        client_id, _, start = self._replay.recv_multipart()
        start_seq = int.from_bytes(start, "big")
        for seq, payload in self._buffer:
            if seq >= start_seq:
                self._replay.send_multipart((client_id, b"", seq.to_bytes(8, "big"), payload))
        self._replay.send_multipart((client_id, b"", END_SEQ, b""))
        return True

    def close(self):
        self._pub.close(linger=0)
        if self._replay is not None:
            self._replay.close(linger=0)
