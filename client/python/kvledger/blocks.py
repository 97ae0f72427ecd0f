"""Prefix block ids for a record's `prefix_block_ids` (docs/cost-model.md §14): the server replays them
through each cache's LRU stack to count what every capacity of its ladder would have matched.

An id must name the whole prefix through its block (chained), so that equal ids mean equal prefixes:

    ids = kvledger.blocks.prefix_block_ids(token_ids, block_tokens=16)
    reporter.report(model=..., prompt_tokens=len(token_ids), ..., prefix_block_ids=ids, block_tokens=16,
                    cache_id="engine-0")

`prefix_block_ids` computes such ids from token ids, for a gateway or router that has the tokens:
id(i) is the low 64 bits of SHA-256(id(i-1) as 8 bytes big-endian || salt || the block's token ids as
4-byte little-endian integers), with id(-1) = 0. They are kvledger's own, not vLLM's (vLLM hashes
CBOR-encoded (parent hash, tokens, extra keys) from a seed of its own, vllm/v1/core/kv_cache_utils.py),
so the two never compare; within one cache any consistent chained ids serve. Put a LoRA adapter's name,
a cache salt or an image digest into `salt` where vLLM would put it into its extra keys: prompts that
would not share cache entries must not share ids.

An engine that has its own block hashes passes them through `from_engine_hashes`: vLLM's `BlockHash`
bytes become the same 64-bit integers vLLM's KV events carry with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES
(`int.from_bytes(hash, "big") & (2**64 - 1)`, maybe_convert_block_hash in kv_cache_utils.py), and
integers (SGLang's, a trace's hash_ids) are kept modulo 2^64.
"""
import hashlib
import operator
import struct

_MASK = (1 << 64) - 1


def prefix_block_ids(token_ids, block_tokens, *, salt=b"", full_blocks_only=False):
    """Chained 64-bit ids of the blocks of `token_ids`, `block_tokens` tokens each, in order. A partial
    last block gets an id too (the server never matches past the prompt), unless `full_blocks_only`
    (vLLM caches full blocks only). At most ceil(len(token_ids) / block_tokens) ids: what the server
    accepts."""
    if block_tokens < 1:
        raise ValueError(f"block_tokens = {block_tokens}: must be >= 1")
    if isinstance(salt, str):
        salt = salt.encode()
    ids, parent = [], 0
    end = len(token_ids) - len(token_ids) % block_tokens if full_blocks_only else len(token_ids)
    for start in range(0, end, block_tokens):
        block = token_ids[start:start + block_tokens]
        digest = hashlib.sha256(struct.pack(">Q", parent) + salt + struct.pack(f"<{len(block)}I", *block)).digest()
        parent = int.from_bytes(digest, "big") & _MASK
        ids.append(parent)
    return ids


def engine_hash_id(h):
    """One engine block hash as a 64-bit id: bytes as vLLM's KV events convert them to integers (big
    endian, the low 64 bits), integers modulo 2^64. ValueError naming the value otherwise."""
    if isinstance(h, (bytes, bytearray)):
        return int.from_bytes(h, "big") & _MASK
    if not isinstance(h, bool):
        try:
            return operator.index(h) & _MASK
        except TypeError:
            pass
    raise ValueError(f"block hash = {h!r}: must be bytes or an integer")


def from_engine_hashes(hashes):
    """An engine's own chained block hashes as `prefix_block_ids`, each as engine_hash_id converts it.
    (A list of bytes alone takes a faster path: vLLM's connector calls this in its scheduler's loop.)"""
    if hashes and all(type(h) is bytes for h in hashes):
        return [int.from_bytes(h, "big") & _MASK for h in hashes]
    return [engine_hash_id(h) for h in hashes]
