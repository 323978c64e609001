"""Inputs and checks of dcp.test (numpy only; the ownership rule is written out here on purpose, as an
independent check of mla/Contract/DcpShard.h and the CPU lowering).

  dcp_shards.py make DIR SEQ_LENS...   global decode inputs (Inputs/decode.mlir's shapes) in DIR, and the
                                       two token-interleaved shards (world 2, interleave 1) of the cache
  dcp_shards.py same REF OUT           OUT's two results equal REF's (decode_out0/1.npy)
  dcp_shards.py merge REF RANKS...     the LSE combine of the ranks' partial states equals REF's decode
"""

import sys

import numpy as np

WORLD, PAGE = 2, 16


def make(d, lens):
    rng = np.random.default_rng(sum(lens) + 1)
    q = rng.standard_normal((2, 2, 3, 80)).astype(np.float32)
    cache = rng.standard_normal((8, PAGE, 80)).astype(np.float32)
    bt = rng.permutation(8).reshape(2, 4).astype(np.int32)
    lens = np.array(lens, np.int32)
    for name, a in (("q", q), ("cache", cache), ("bt", bt), ("lens", lens)):
        np.save(f"{d}/{name}.npy", a)
    # Rank r owns global tokens t with t % WORLD == r, at local position t // WORLD; 2 local pages per request.
    for r in range(WORLD):
        local = np.full((5, PAGE, 80), np.nan, np.float32)  # unused rows must never be read
        table = np.arange(4, dtype=np.int32).reshape(2, 2)
        for b in range(2):
            for t in range(r, int(lens[b]), WORLD):
                j = t // WORLD
                local[table[b, j // PAGE], j % PAGE] = cache[bt[b, t // PAGE], t % PAGE]
        np.save(f"{d}/cache{r}.npy", local)
        np.save(f"{d}/bt{r}.npy", table)


def same(ref, out):
    for k in range(2):
        np.testing.assert_allclose(np.load(f"{out}/decode_out{k}.npy"), np.load(f"{ref}/decode_out{k}.npy"),
                                   rtol=1e-5, atol=1e-6)


def merge(ref, ranks):
    outs = np.stack([np.load(f"{r}_out0.npy")[0] for r in ranks])  # [W, B, Sq, N, L]
    lses = np.stack([np.load(f"{r}_out1.npy")[0] for r in ranks])  # [W, B, N, Sq]
    m = lses.max(axis=0)
    w = np.where(lses == -np.inf, 0.0, np.exp(lses - np.where(m == -np.inf, 0.0, m)))
    total = w.sum(axis=0)
    wo = np.transpose(w, (0, 1, 3, 2))[..., None]  # [W, B, Sq, N, 1]
    out = np.where(np.transpose(total, (0, 2, 1))[..., None] > 0,
                   (wo * outs).sum(axis=0) / np.maximum(np.transpose(total, (0, 2, 1))[..., None], 1e-30), 0.0)
    lse = np.where(total > 0, m + np.log(np.maximum(total, 1e-30)), -np.inf)
    np.testing.assert_allclose(out, np.load(f"{ref}/decode_out0.npy"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, np.load(f"{ref}/decode_out1.npy"), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(args[0], [int(a) for a in args[1:]])
    elif cmd == "same":
        same(*args)
    else:
        merge(args[0], args[1:])
    print(f"{cmd}: ok")
