"""Decode context parallelism (DCP): the latent cache's tokens sharded over ranks, as vLLM lays them out.

Each request's cache is spread over `world_size` ranks in runs of `interleave` tokens: global token t lives
on rank (t // interleave) % world_size at local position
(t // (world_size * interleave)) * interleave + t % interleave (vLLM's `dcp_kv_cache_interleave_size`,
default 1: token t on rank t % world_size). A rank holds a paged cache and block table of its own tokens
only; `seq_lens` stay global. One decode step on rank r:

  out_r, lse_r = mla.dcp.decode_local(q, local_cache, local_block_table, seq_lens, world_size=W, rank=r, ...)
  gathered_out, gathered_lse = all_gather(out_r, lse_r)      # [W, ...]: NCCL/gloo, or any transport
  out, lse = mla.dcp.combine(gathered_out, gathered_lse)     # the LSE combine, mla.merge_states

`mla.dcp.decode` does all three with a transport (`TorchAllGather` over torch.distributed: NCCL on the
current CUDA stream, gloo on the CPU; `QueueAllGather` for plain multiprocessing without torch).
`shard_cache` cuts a global cache and block table into the ranks' local ones (for tests and benchmarks).
The dialect's form of the same decomposition is `#mla.dcp_shard` and the `mla-dcp` pass; the ownership rule
is `mla/Contract/DcpShard.h`, mirrored by `owned_tokens` here.
"""

import numpy as np

import mla


def owned_tokens(n, world_size, rank, interleave=1):
    """How many of the global positions [0, n) rank `rank` owns (elementwise; n <= 0 owns none): the
    rank's local length when n is a global length, the local positions a causal row sees when n is the
    number of global positions it sees."""
    _check_shard(world_size, rank, interleave)
    n = np.maximum(np.asarray(n, dtype=np.int64), 0)
    cycle = world_size * interleave
    rest = np.clip(n % cycle - rank * interleave, 0, interleave)
    return n // cycle * interleave + rest


def global_positions(local, world_size, rank, interleave=1):
    """The global positions of rank `rank`'s local positions `local`."""
    local = np.asarray(local, dtype=np.int64)
    return local // interleave * world_size * interleave + rank * interleave + local % interleave


def _check_shard(world_size, rank, interleave):
    if not (isinstance(world_size, (int, np.integer)) and world_size >= 1):
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    if not (isinstance(rank, (int, np.integer)) and 0 <= rank < world_size):
        raise ValueError(f"rank must be an int in [0, world_size = {world_size}), got {rank!r}")
    if not (isinstance(interleave, (int, np.integer)) and interleave >= 1):
        raise ValueError(f"interleave must be a positive int (tokens per run), got {interleave!r}")


def shard_cache(kv_cache, block_table, seq_lens, world_size, *, interleave=1):
    """Cuts a global paged cache into `world_size` local ones (numpy).

    kv_cache [pages, page_size, row], block_table [b, max_pages], seq_lens [b] (global). Returns one
    (local_cache, local_block_table, local_seq_lens) per rank: request b's local tokens fill its own pages
    (page b * local_pages + k, then one spare page that no table names); unused rows are zero. Every rank's
    table has the same width, local_pages = the pages rank 0 needs for max_pages * page_size tokens."""
    kv_cache, block_table = np.asarray(kv_cache), np.asarray(block_table)
    seq_lens = np.asarray(seq_lens, dtype=np.int64)
    page = kv_cache.shape[1]
    batch, max_pages = block_table.shape
    local_pages = -(-int(owned_tokens(max_pages * page, world_size, 0, interleave)) // page)
    shards = []
    for rank in range(world_size):
        cache = np.zeros((batch * local_pages + 1,) + kv_cache.shape[1:], kv_cache.dtype)
        table = (np.arange(batch * local_pages, dtype=np.int32).reshape(batch, max(local_pages, 0)))
        lens = owned_tokens(seq_lens, world_size, rank, interleave)
        for b in range(batch):
            local = np.arange(lens[b])
            t = global_positions(local, world_size, rank, interleave)
            cache[table[b, local // page], local % page] = kv_cache[block_table[b, t // page], t % page]
        shards.append((cache, table, lens.astype(np.int32)))
    return shards


def _is_torch(value):
    return type(value).__module__.startswith("torch")


def _slice_row(q, i):
    row = q[:, i:i + 1]
    return row.contiguous() if _is_torch(row) else np.ascontiguousarray(row)


def decode_local(q, kv_cache, block_table, seq_lens, *, world_size, rank, interleave=1, head_dim_v,
                 softmax_scale, causal=False, num_splits=None):
    """Rank `rank`'s decode over its shard: `mla.decode` semantics with kv_cache/block_table the rank's
    local ones and seq_lens global. Returns the rank-local (out [b, s_q, h_q, L] float32,
    lse [b, h_q, s_q]); a row that sees none of the rank's tokens has lse -inf.

    Causal row i sees the global positions [0, seq_lens[b] - s_q + i]; on a rank those are not the last
    rows of a local range, so with s_q > 1 each query row runs as its own non-causal decode over the
    local positions it sees. Runs on q's device (numpy: CPU, torch CUDA: the GPU kernels)."""
    _check_shard(world_size, rank, interleave)
    torch_in = _is_torch(q)
    host_lens = (seq_lens.cpu().numpy() if _is_torch(seq_lens) else np.asarray(seq_lens)).astype(np.int64)
    s_q = q.shape[1]
    rows = [s_q - 1] if not causal or s_q == 1 else range(s_q)
    outs, lses = [], []
    for i in rows:
        visible = host_lens if not causal else host_lens - s_q + i + 1
        local = owned_tokens(visible, world_size, rank, interleave).astype(np.int32)
        if torch_in:
            import torch

            local = torch.from_numpy(local).to(q.device)
        qi = q if len(rows) == 1 else _slice_row(q, i)
        o, lse = mla.decode(qi, kv_cache, block_table, local, head_dim_v=head_dim_v,
                            softmax_scale=softmax_scale, causal=False, num_splits=num_splits)
        outs.append(o)
        lses.append(lse)
    if len(rows) == 1:
        out, lse = outs[0], lses[0]
    elif torch_in:
        import torch

        out, lse = torch.cat(outs, dim=1), torch.cat(lses, dim=2)
    else:
        out, lse = np.concatenate(outs, axis=1), np.concatenate(lses, axis=2)
    return (out.float() if torch_in else out.astype(np.float32)), lse


def combine(gathered_out, gathered_lse, *, out_dtype=None):
    """The LSE combine over a gathered rank axis (`mla.dcp_combine`): gathered_out [W, b, s_q, h_q, L]
    float32, gathered_lse [W, b, h_q, s_q]. Returns (out [b, s_q, h_q, L] of `out_dtype` (default
    float32), lse float32 [b, h_q, s_q]); ranks with lse -inf weigh nothing, and a row no rank saw is
    out 0, lse -inf. Folds the ranks with W - 1 `mla.merge_states` calls in float32 (the GPU kernel on
    CUDA tensors)."""
    world, b, s_q, h, width = gathered_out.shape
    torch_in = _is_torch(gathered_out)

    def states(r):
        o = gathered_out[r].reshape(b * s_q, h, width)
        lse = gathered_lse[r].permute(1, 0, 2) if torch_in else gathered_lse[r].transpose(1, 0, 2)
        lse = lse.reshape(h, b * s_q)
        if torch_in:
            return o.contiguous(), lse.contiguous()
        return np.ascontiguousarray(o), np.ascontiguousarray(lse)

    out, lse = states(0)
    if world == 1:
        out, lse = (out.clone(), lse.clone()) if torch_in else (out.copy(), lse.copy())
    for r in range(1, world):
        o, l = states(r)
        out, lse = mla.merge_states(out, lse, o, l)
    out = out.reshape(b, s_q, h, width)
    lse = lse.reshape(h, b, s_q)
    lse = lse.permute(1, 0, 2).contiguous() if torch_in else np.ascontiguousarray(lse.transpose(1, 0, 2))
    if out_dtype is not None:
        out = out.to(out_dtype) if torch_in else out.astype(out_dtype)
    return out, lse


class TorchAllGather:
    """All-gather over torch.distributed (`group`, default the world): NCCL on torch's current CUDA
    stream for CUDA tensors (all_gather_into_tensor), gloo for CPU tensors; numpy arrays go through
    CPU tensors. Returns [W, ...] stacks of each rank's out and lse."""

    def __init__(self, group=None):
        import torch.distributed as dist

        self.dist, self.group = dist, group
        self.world_size = dist.get_world_size(group)

    def _gather(self, x):
        import torch

        numpy_in = isinstance(x, np.ndarray)
        t = torch.from_numpy(np.ascontiguousarray(x)) if numpy_in else x.contiguous()
        result = torch.empty((self.world_size,) + tuple(t.shape), dtype=t.dtype, device=t.device)
        if t.is_cuda:
            self.dist.all_gather_into_tensor(result, t, group=self.group)
        else:
            # gloo has no all_gather_into_tensor on every torch release; the list form is the same data.
            self.dist.all_gather(list(result.unbind(0)), t, group=self.group)
        return result.numpy() if numpy_in else result

    def __call__(self, out, lse):
        return self._gather(out), self._gather(lse)


class QueueAllGather:
    """All-gather between `world_size` processes over multiprocessing queues (no torch): `inboxes[r]` is
    rank r's queue, made by the parent (`QueueAllGather.make_inboxes(ctx, world_size)`) and handed to every
    rank. Each call is one collective; calls are matched by their order."""

    def __init__(self, rank, inboxes):
        self.rank, self.inboxes, self.step, self.pending = rank, inboxes, 0, {}

    @staticmethod
    def make_inboxes(ctx, world_size):
        return [ctx.Queue() for _ in range(world_size)]

    def __call__(self, out, lse):
        world = len(self.inboxes)
        for r, box in enumerate(self.inboxes):
            if r != self.rank:
                box.put((self.step, self.rank, np.asarray(out), np.asarray(lse)))
        states = {self.rank: (np.asarray(out), np.asarray(lse))}
        states.update(self.pending.pop(self.step, {}))
        while len(states) < world:
            step, r, o, l = self.inboxes[self.rank].get(timeout=120)
            if step == self.step:
                states[r] = (o, l)
            else:
                self.pending.setdefault(step, {})[r] = (o, l)
        self.step += 1
        return (np.stack([states[r][0] for r in range(world)]), np.stack([states[r][1] for r in range(world)]))


def decode(q, kv_cache, block_table, seq_lens, *, world_size, rank, all_gather, interleave=1, head_dim_v,
           softmax_scale, causal=False, num_splits=None):
    """One DCP decode step on rank `rank`: the local decode of its shard, `all_gather(out, lse)` (a
    `TorchAllGather`, a `QueueAllGather` or any callable returning [W, ...] stacks) and the combine.
    Returns (out [b, s_q, h_q, L] of q's dtype, lse float32 [b, h_q, s_q]), the same on every rank and
    equal to `mla.decode` over the global cache."""
    out, lse = decode_local(q, kv_cache, block_table, seq_lens, world_size=world_size, rank=rank,
                            interleave=interleave, head_dim_v=head_dim_v, softmax_scale=softmax_scale,
                            causal=causal, num_splits=num_splits)
    gathered_out, gathered_lse = all_gather(out, lse)
    return combine(gathered_out, gathered_lse, out_dtype=q.dtype)
