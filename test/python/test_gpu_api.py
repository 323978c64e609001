"""Argument checks of mla's GPU path (mla.gpu and libMLAGpuCAPI.so) that need no GPU.

Everything here is rejected before a CUDA driver is touched: spec construction, the C API's validation of
sizes, lengths and split choices (called through ctypes as the package calls it), and, where torch is
installed, the Python layer's checks of tensors (CPU tensors reach every check but the last, which says
the GPU path takes CUDA tensors). Numerical results are checked on a GPU by test_gpu_decode.py.
"""

import ctypes
import importlib.util
import re
import struct

import pytest

import mla
from mla import gpu

SCALE = 192**-0.5
HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def lib():
    try:
        return gpu._library()
    except RuntimeError as error:
        pytest.skip(f"libMLAGpuCAPI.so is not built here (the build found no cuda.h): {error}")


def spec_text(heads=128, sq=1, causal=False, dtype="bf16", tile=None):
    return gpu.decode_spec(heads, sq, 512, 64, 64, dtype, causal, "sm_90a", tile)


def test_spec_text_is_canonical(lib):
    # The softmax scale is a launch argument: no spec, and no cache key, names it.
    assert spec_text() == "decode chip=sm_90a N=128 Sq=1 L=512 R=64 page=64 dtype=bf16 causal=0 tile=64x2x64x2s"
    assert spec_text(16, 2, True).endswith("causal=1 tile=64x2x64x2s")
    bits = struct.unpack("<I", struct.pack("<f", SCALE))[0]
    assert gpu.kernel_spec(spec_text() + f" scale=0x{bits:08x}") == spec_text()
    assert spec_text(16, tile="64x2x32x2").endswith("tile=64x2x32x2")
    assert "dtype=f16" in spec_text(dtype="f16")


@pytest.mark.parametrize("kwargs, message", [
    (dict(latent_dim=500), "no decode kernel for this shape"),
    (dict(dtype="fp32"), "dtype must be 'bf16' or 'f16'"),
    (dict(chip="sm_80"), "unknown chip 'sm_80'"),
    (dict(num_heads=0), "number of heads must be in [1"),
    (dict(tile="64x2x48x2"), "the given tile cannot run this shape"),
])
def test_spec_rejects_what_no_kernel_can_run(lib, kwargs, message):
    args = dict(num_heads=128, query_rows=1, latent_dim=512, rope_dim=64, page_size=64, dtype="bf16",
                causal=False, chip="sm_90a")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        gpu.decode_spec(**args)


def c_tensor(dtype, shape, data=0):
    t = gpu._Tensor()
    t.data, t.dtype, t.rank = data, dtype, len(shape)
    for i, d in enumerate(shape):
        t.shape[i] = d
    return t


def c_decode(lib, *, spec=None, lens=(64, 128), batch=None, max_pages=2, num_pages=4, num_splits=2, policy=0,
             pointers=0, workspace=0, workspace_bytes=1 << 30, host_lens=True, heads=128, sq=1, causal=False,
             check_only=False, table=None):
    """Calls mlaGpuDecode (or mlaGpuCheckDecode) as mla.gpu does; returns (code, message, workspace bytes)."""
    spec = (spec if spec is not None else spec_text(heads, sq, causal)).encode()
    b = len(lens) if batch is None else batch
    bf16, i32 = gpu._DTYPE_BF16, gpu._DTYPE_INT32
    tensors = [c_tensor(bf16, (b, sq, heads, 576), pointers), c_tensor(bf16, (num_pages, 64, 576), pointers),
               c_tensor(i32, (b, max_pages), pointers), c_tensor(i32, (b,), pointers)]
    opts = gpu._DecodeOptions(headDimV=512, softmaxScale=SCALE, causal=causal, splitPolicy=policy)
    if num_splits is not None:
        opts.hasNumSplits, opts.numSplits = 1, num_splits
    host = (ctypes.c_int32 * len(lens))(*lens)
    host_ptr = ctypes.cast(host, ctypes.POINTER(ctypes.c_int32)) if host_lens else None
    table_ptr = None
    if table is not None:
        flat = [page for row in table for page in row]
        table_host = (ctypes.c_int32 * len(flat))(*flat)
        table_ptr = ctypes.cast(table_host, ctypes.POINTER(ctypes.c_int32))
    size = ctypes.c_size_t(workspace_bytes)
    err = ctypes.create_string_buffer(4096)
    refs = [ctypes.byref(t) for t in tensors]
    if check_only:
        code = lib.mlaGpuCheckDecode(*refs, host_ptr, table_ptr, ctypes.byref(opts), err, len(err))
    else:
        code = lib.mlaGpuDecode(spec, 0, *refs, host_ptr, table_ptr, ctypes.byref(opts), pointers, pointers, 0,
                                workspace, ctypes.byref(size), None, err, len(err))
    return code, err.value.decode(), size.value


def test_workspace_size_query_needs_no_gpu(lib):
    code, message, size = c_decode(lib, num_splits=3)
    assert code == gpu.SUCCESS, message
    rows = 3 * 2 * 1 * 128  # S * B * Sq * N
    align = lambda n: (n + 255) // 256 * 256  # noqa: E731
    # The seesaw kernel's combine counters follow the bounds: B x ceil(Sq * N / 64) words.
    assert size == align(rows * 512 * 4) + align(rows * 4) + 2 * (3 + 1) * 4 + 2 * 2 * 4


@pytest.mark.parametrize("kwargs, message", [
    (dict(spec="decode chip=sm_90a N=128"), "bad kernel spec"),
    (dict(batch=0, lens=()), "batch size must be in [1, 65535]"),
    (dict(max_pages=0), "at least one column"),
    (dict(num_pages=0), "kv_cache has no pages"),
    (dict(num_splits=-1), "num_splits must be positive, got -1"),
    (dict(num_splits=0), "num_splits must be positive, got 0"),
    (dict(num_splits=70000), "num_splits = 70000 must be in [1, 65535]"),
    (dict(num_splits=None, policy=7), "unknown split policy 7"),
    (dict(lens=(64, 129)), "seq_lens[1] = 129 exceeds block_table capacity 128 (2 pages of 64)"),
    (dict(lens=(-1, 3)), "seq_lens[0] = -1 is negative"),
    (dict(num_splits=None, policy=1, host_lens=False), "pass them on the host"),
    (dict(workspace=256), "device pointer q is null"),
    (dict(spec=spec_text(128), heads=16), "was not made for these arguments, which need 'decode chip=sm_90a N=16 "),
])
def test_c_api_rejects_bad_calls_before_touching_the_gpu(lib, kwargs, message):
    code, text, _ = c_decode(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert message in text


def test_causal_rows_need_their_tokens_in_the_cache(lib):
    # Two causal query rows are the request's last two positions: one cached token cannot hold them.
    code, text, _ = c_decode(lib, heads=16, sq=2, causal=True, lens=(1, 64))
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert "causal decode needs seq_lens[0] = 1 >= s_q = 2" in text
    code, text, _ = c_decode(lib, heads=16, sq=2, causal=True, lens=(0, 2))
    assert code == gpu.SUCCESS, text


def test_the_rules_run_without_a_spec(lib):
    """mlaGpuCheckDecode is what mla.gpu calls before it knows the device: the rules alone."""
    code, text, _ = c_decode(lib, check_only=True, spec="not a spec")
    assert code == gpu.SUCCESS, text
    code, text, _ = c_decode(lib, check_only=True, num_splits=65536)
    assert code == gpu.ERROR_INVALID_ARGUMENT
    assert "num_splits = 65536 must be in [1, 65535]" in text


def test_small_workspace_is_rejected(lib):
    code, text, _ = c_decode(lib, pointers=4096, workspace=4096, workspace_bytes=4096)
    assert code == gpu.ERROR_INVALID_ARGUMENT
    assert "the workspace holds" in text and "need" in text


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed: its absence cannot be tested")
def test_gpu_path_without_torch_names_torch():
    with pytest.raises(ValueError, match="torch is not installed"):
        gpu.decode(None, None, None, None, head_dim_v=512, softmax_scale=SCALE)


def test_numpy_inputs_never_take_the_gpu_path():
    assert not mla._is_torch_cuda([1.0])
    assert not mla._is_torch_cuda(None)


# ---------------------------------------------------------------------------------------------------
# Python-level tensor checks (torch CPU tensors)
# ---------------------------------------------------------------------------------------------------

def cpu_inputs(torch, b=2, sq=1, n=16, pages=4, page=64, d=576, max_pages=2):
    return dict(q=torch.zeros(b, sq, n, d, dtype=torch.bfloat16),
                kv_cache=torch.zeros(pages, page, d, dtype=torch.bfloat16),
                block_table=torch.zeros(b, max_pages, dtype=torch.int32),
                seq_lens=torch.zeros(b, dtype=torch.int32))


def mutations(torch):
    f32 = torch.float32
    return [
        ("q not a tensor", lambda a: a.update(q=[[1.0]]), "q must be a torch tensor"),
        ("q rank", lambda a: a.update(q=a["q"][0]), "q must have rank 4"),
        ("q dtype", lambda a: a.update(q=a["q"].to(f32)), "bfloat16 or float16"),
        ("q strided", lambda a: a.update(q=a["q"].repeat(1, 1, 1, 2)[..., ::2]), "q must be contiguous"),
        ("cache dtype", lambda a: a.update(kv_cache=a["kv_cache"].half()),
         "kv_cache is float16 but kv_format 'auto' stores q's dtype bfloat16"),
        ("cache width", lambda a: a.update(kv_cache=a["kv_cache"][:, :, :512].contiguous()),
         r"kv_cache rows have 512 elements but L \+ R = 512 \+ 64 = 576"),
        ("table dtype", lambda a: a.update(block_table=a["block_table"].long()), "block_table has dtype"),
        ("table floats", lambda a: a.update(block_table=a["block_table"].float()),
         "block_table must be int32, got float32"),
        ("lens dtype", lambda a: a.update(seq_lens=a["seq_lens"].long()), "seq_lens has dtype"),
        ("lens batch", lambda a: a.update(seq_lens=a["seq_lens"][:1]),
         r"seq_lens dim 0 is 1 but q's batch size \(dim 0\) is 2"),
        ("lens rank", lambda a: a.update(seq_lens=a["seq_lens"].view(2, 1)), r"seq_lens must have rank 1 \(\[B\]\)"),
        ("lens values", lambda a: a.update(seq_lens=torch.tensor([0, 129], dtype=torch.int32)),
         r"seq_lens\[1\] = 129 exceeds block_table capacity 128 \(2 pages of 64\)"),
        ("table width", lambda a: a.update(block_table=a["block_table"][:, :0]), "at least one column"),
    ]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: the tensor checks need torch tensors")
def test_tensor_checks_raise_value_error():
    import torch
    for name, mutate, message in mutations(torch):
        args = cpu_inputs(torch)
        mutate(args)
        with pytest.raises(ValueError, match=message):
            gpu.decode(**args, head_dim_v=512, softmax_scale=SCALE)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: the option checks need torch tensors")
@pytest.mark.parametrize("options, message", [
    (dict(head_dim_v=576), r"head_dim_v = 576 must be in \[1, 575\]"),
    (dict(head_dim_v="512"), "head_dim_v must be an integer"),
    (dict(softmax_scale=-1.0), "softmax_scale must be positive and finite"),
    (dict(softmax_scale=float("nan")), "softmax_scale must be positive and finite"),
    (dict(num_splits=0), "num_splits must be positive, got 0"),
    (dict(num_splits=70000), r"num_splits = 70000 must be in \[1, 65535\]"),
    (dict(split_policy="fast"), "split_policy must be one of"),
    (dict(split_policy="grid\x00junk"), "split_policy must be one of"),
    (dict(kv_format="fp8_e4m3", kv_scale=1.0), "kv_format 'fp8_e4m3' needs a uint8 kv_cache, got bfloat16"),
    (dict(kv_format="fp8_ds_mla"), "kv_format 'fp8_ds_mla' needs a uint8 kv_cache"),
    (dict(kv_scale=1.0), "kv_scale is only used by kv_format 'fp8_e4m3', not 'auto'"),
    (dict(kv_format="fp8_e5m2"), "kv_format 'fp8_e5m2' is unknown"),
    (dict(kv_format="auto\x00junk"), "kv_format holds a NUL byte at offset 4"),
    (dict(), "q is on cpu; the GPU path takes CUDA tensors"),
])
def test_option_checks_raise_value_error(options, message):
    import torch
    kwargs = dict(head_dim_v=512, softmax_scale=SCALE)
    kwargs.update(options)
    with pytest.raises(ValueError, match=message):
        gpu.decode(**cpu_inputs(torch), **kwargs)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: the option checks need torch tensors")
@pytest.mark.parametrize("kv_format, width, kv_scale, message", [
    # Valid fp8 calls pass every argument rule; only the CPU tensors stop them.
    ("fp8_e4m3", 576, 0.5, "q is on cpu; the GPU path takes CUDA tensors"),
    ("fp8_e4m3_token", 584, None, "q is on cpu; the GPU path takes CUDA tensors"),
    ("fp8_ds_mla", 656, None, "q is on cpu; the GPU path takes CUDA tensors"),
    ("fp8_e4m3", 576, None, "kv_format 'fp8_e4m3' needs kv_scale"),
    ("fp8_ds_mla", 656, 0.5, "kv_scale is only used by kv_format 'fp8_e4m3', not 'fp8_ds_mla'"),
    ("fp8_ds_mla", 576, None, "rows have 576 bytes but kv_format .fp8_ds_mla. with L = 512, R = 64 needs 656"),
    ("fp8_e4m3_token", 576, None, "needs 584"),
])
def test_fp8_cache_checks_raise_value_error(kv_format, width, kv_scale, message):
    import torch
    inputs = cpu_inputs(torch)
    inputs["kv_cache"] = torch.zeros(4, 64, width, dtype=torch.uint8)
    with pytest.raises(ValueError, match=message):
        gpu.decode(**inputs, head_dim_v=512, softmax_scale=SCALE, kv_format=kv_format, kv_scale=kv_scale)


def test_fp8_decode_spec_names_its_format(lib):
    """The spec of an fp8 decode prints the row format before the tile; at 16 query rows every format takes
    the 16-row mma.sync kernel; at 128 heads fp8_e4m3 and fp8_ds_mla take the seesaw build, fp8_e4m3_token
    (which it cannot load) the wgmma kernel, and f16 q the wgmma / mma.sync kernels."""
    e4m3 = gpu.decode_spec(16, 1, 512, 64, 64, "bf16", False, "sm_90a", kv_format="fp8_e4m3")
    assert e4m3.endswith(" format=fp8_e4m3 tile=16x4x64x2"), e4m3
    e4m3 = gpu.decode_spec(128, 1, 512, 64, 64, "bf16", False, "sm_90a", kv_format="fp8_e4m3")
    assert e4m3.endswith(" format=fp8_e4m3 tile=64x2x64x2s"), e4m3
    e4m3 = gpu.decode_spec(128, 1, 512, 64, 64, "f16", False, "sm_90a", kv_format="fp8_e4m3")
    assert e4m3.endswith(" format=fp8_e4m3 tile=64x2x64x2w"), e4m3
    token = gpu.decode_spec(16, 1, 512, 64, 64, "bf16", False, "sm_90a", kv_format="fp8_e4m3_token")
    assert token.endswith(" format=fp8_e4m3_token tile=16x4x32x2"), token
    token = gpu.decode_spec(128, 1, 512, 64, 64, "bf16", False, "sm_90a", kv_format="fp8_e4m3_token")
    assert token.endswith(" format=fp8_e4m3_token tile=64x2x64x2w"), token
    ds = gpu.decode_spec(128, 1, 512, 64, 64, "bf16", False, "sm_90a", kv_format="fp8_ds_mla")
    assert ds.endswith(" format=fp8_ds_mla tile=64x2x64x2s"), ds
    assert "format" not in gpu.decode_spec(16, 1, 512, 64, 64, "bf16", False, "sm_90a")
    # sm_100a: fp8_e4m3 over 64-token blocks, fp8_ds_mla over 32 (its raw ring fits beside Q and one KV
    # tile only so), and no fp8_e4m3_token (584-byte rows are not whole 16-byte cp.async chunks).
    e4m3 = gpu.decode_spec(128, 1, 512, 64, 128, "bf16", False, "sm_100a", kv_format="fp8_e4m3")
    assert e4m3.endswith(" format=fp8_e4m3 tile=64x1x64x2"), e4m3
    ds = gpu.decode_spec(128, 1, 512, 64, 128, "bf16", False, "sm_100a", kv_format="fp8_ds_mla")
    assert ds.endswith(" format=fp8_ds_mla tile=64x1x32x2"), ds
    with pytest.raises(ValueError, match="does not read fp8_e4m3_token caches"):
        gpu.decode_spec(128, 1, 512, 64, 128, "bf16", False, "sm_100a", kv_format="fp8_e4m3_token")


def test_seesaw_tile_over_fp8(lib):
    """The seesaw tile builds over fp8_e4m3 and fp8_ds_mla under bf16 q (KernelABI.h decodeSeesawReadsE4M3;
    given, and the default from 64 query rows), and is refused, with the reason, for f16 q and for
    fp8_e4m3_token (whose odd rows no TMA box may start on)."""
    for kv_format in ("fp8_e4m3", "fp8_ds_mla"):
        spec = gpu.decode_spec(16, 1, 512, 64, 64, "bf16", False, "sm_90a", tile="64x2x64x2s",
                               kv_format=kv_format)
        assert spec.endswith(f" format={kv_format} tile=64x2x64x2s"), spec
    for kv_format in ("fp8_e4m3", "fp8_ds_mla"):
        with pytest.raises(ValueError, match="fp8_e4m3 and fp8_ds_mla caches under bf16 activations with R = 64"):
            gpu.decode_spec(128, 1, 512, 64, 64, "f16", False, "sm_90a", tile="64x2x64x2s", kv_format=kv_format)
    with pytest.raises(ValueError, match="odd 584-byte row starts 8 bytes off a 16-byte boundary"):
        gpu.decode_spec(128, 1, 512, 64, 64, "bf16", False, "sm_90a", tile="64x2x64x2s",
                        kv_format="fp8_e4m3_token")


def test_multicast_tile(lib):
    """The multicast tile (the seesaw build in clusters of two sharing the KV boxes) names itself in the spec,
    and is refused, with the reason, where a cluster's two 64-row blocks would not be one query token's heads
    (N not a multiple of 128) and for fp8 caches."""
    assert spec_text(tile="64x2x64x2m").endswith(" tile=64x2x64x2m")
    assert spec_text(256, 2, True, tile="64x2x64x2m").endswith("causal=1 tile=64x2x64x2m")
    for heads in (16, 64, 192):
        with pytest.raises(ValueError, match=f"N a multiple of 128 .*got N = {heads}; use tile suffix s"):
            spec_text(heads, tile="64x2x64x2m")
    with pytest.raises(ValueError, match="multicast decode .tile suffix m. is the seesaw build over bf16/f16") as e:
        gpu.decode_spec(128, 1, 512, 64, 64, "bf16", False, "sm_90a", tile="64x2x64x2m", kv_format="fp8_e4m3")
    assert "got N" not in str(e.value), "N = 128 is not what the fp8 cache is refused for"
    with pytest.raises(ValueError, match="multicast decode"):
        gpu.decode_spec(128, 1, 512, 64, 64, "bf16", False, "sm_100a", tile="64x2x64x2m")


@pytest.mark.parametrize("check_only", [True, False])
def test_host_block_table_pages_are_checked(lib, check_only):
    """With a host copy of the block table, a page a request reads that the cache does not hold is an
    error naming block_table before anything runs (mla.gpu.decode always passes one)."""
    code, message, _ = c_decode(lib, lens=(64, 128), table=[[0, 1], [2, 10**6]], check_only=check_only)
    assert code == gpu.ERROR_INVALID_ARGUMENT and "block_table[1, 1] = 1000000" in message, message
    code, message, _ = c_decode(lib, lens=(64, 64), table=[[0, 1], [2, 10**6]], check_only=True)
    assert code == gpu.SUCCESS, message  # request 1 reads only its first page


# ---------------------------------------------------------------------------------------------------
# Decode plans (mlaGpuDecodePlan*): what is rejected before a GPU is needed
# ---------------------------------------------------------------------------------------------------

def c_plan_create(lib, *, lens=2, max_batch=0, max_seq_len=0, num_splits=3, policy=3, heads=128, spec_heads=128):
    """mlaGpuDecodePlanCreate's size query (workspace 0); returns (code, message, workspace bytes)."""
    bf16, i32 = gpu._DTYPE_BF16, gpu._DTYPE_INT32
    tensors = [c_tensor(bf16, (lens, 1, heads, 576)), c_tensor(bf16, (8, 64, 576)), c_tensor(i32, (lens, 4)),
               c_tensor(i32, (lens,))]
    opts = gpu._DecodeOptions(headDimV=512, softmaxScale=0.0, splitPolicy=policy)
    if num_splits is not None:
        opts.hasNumSplits, opts.numSplits = 1, num_splits
    size = ctypes.c_size_t(0)
    handle = ctypes.c_void_p()
    err = ctypes.create_string_buffer(4096)
    code = lib.mlaGpuDecodePlanCreate(spec_text(spec_heads).encode(), 0, *[ctypes.byref(t) for t in tensors],
                                      ctypes.byref(opts), max_batch, max_seq_len, 0, ctypes.byref(size), 0,
                                      ctypes.byref(handle), err, len(err))
    assert not handle.value, "a size query makes no plan"
    return code, err.value.decode(), size.value


def test_plan_size_query_needs_no_gpu(lib):
    # The scale is not a plan option (0 is not checked): mlaGpuDecodeRun takes it.
    code, message, size = c_plan_create(lib, max_batch=8, num_splits=3)
    assert code == gpu.SUCCESS, message
    # decodeWorkspaceLayout(N=128, Sq=1, L=512) for 8 requests in 3 pieces, and the seesaw kernel's two
    # combine counters per request.
    rows = 3 * 8 * 128
    align = lambda v: -(-v // 256) * 256  # noqa: E731
    assert size == align(rows * 512 * 4) + align(rows * 4) + 8 * 4 * 4 + 8 * 2 * 4


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_batch=1), "max_batch 1 is below the batch of 2 requests"),
    (dict(num_splits=None, policy=1), "use the grid or batch-invariant split policy or num_splits"),
    (dict(num_splits=None, policy=0), "the heuristic and balanced policies plan on the host"),
    (dict(num_splits=70000), r"num_splits = 70000 must be in \[1, 65535\]"),
    (dict(max_batch=70000), r"batch size must be in \[1, 65535\]"),
    (dict(heads=16), "was not made for these arguments"),
])
def test_plan_rejects_bad_calls_before_touching_the_gpu(lib, kwargs, message):
    code, text, _ = c_plan_create(lib, **kwargs)
    assert code == gpu.ERROR_INVALID_ARGUMENT, text
    assert re.search(message, text), text


def test_plan_functions_reject_a_null_plan(lib):
    err = ctypes.create_string_buffer(512)
    assert lib.mlaGpuDecodePlanNumSplits(None) == 0
    lib.mlaGpuDecodePlanDestroy(None)
    code = lib.mlaGpuDecodeRun(None, 1, 2, 3, 4, 5, 6, SCALE, 0, None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT and b"plan is null" in err.value
    code = lib.mlaGpuDecodeRunPacked(None, gpu._DecodeRunArgs(1, 2, 3, 4, 5, 6, 0, 0, SCALE), err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT and b"plan is null" in err.value
    code = lib.mlaGpuDecodeRunPacked(None, None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT and b"args is NULL" in err.value
    code = lib.mlaGpuDecodePlanUpdate(None, None, None, None, None, None, err, len(err))
    assert code == gpu.ERROR_INVALID_ARGUMENT and b"plan is null" in err.value


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: the plan checks need torch tensors")
def test_python_plan_checks_raise_value_error():
    import torch
    with pytest.raises(ValueError, match="q is on cpu; the GPU path takes CUDA tensors"):
        gpu.plan_decode(**cpu_inputs(torch), head_dim_v=512)
    with pytest.raises(ValueError, match="plan must come from mla.gpu.plan_decode"):
        gpu.decode(**cpu_inputs(torch), head_dim_v=512, softmax_scale=SCALE, plan="a plan")
    with pytest.raises(ValueError, match="num_splits, split_policy and tile are the plan's"):
        gpu.decode(**cpu_inputs(torch), head_dim_v=512, softmax_scale=SCALE, plan="a plan", num_splits=2)


class FakeRunLibrary:
    """Stands in for libMLAGpuCAPI.so behind a DecodePlan, recording the arguments a planned call packs for
    mlaGpuDecodeRunPacked, so the Python half of a planned call runs on CPU tensors."""

    def __init__(self):
        self.runs = []

    def mlaGpuDecodePlanNumSplits(self, handle):
        return 3

    def mlaGpuDecodePlanDestroy(self, handle):
        pass

    def mlaGpuDecodeRunPacked(self, handle, args, err, error_bytes):
        self.runs.append((args.q, args.cache, args.blockTable, args.seqLens, args.out, args.lse,
                          args.softmaxScale, args.kvScale, args.stream, err, error_bytes.value))
        return gpu.SUCCESS


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: the plan checks need torch tensors")
def test_planned_call_checks_against_the_plan(monkeypatch):
    import torch
    monkeypatch.setattr(gpu, "_raw_stream_function", lambda torch: lambda device: 1234)
    fake = FakeRunLibrary()
    inputs = cpu_inputs(torch)
    plan = gpu.DecodePlan(torch, fake, 1, None, None, torch.device("cpu"), None, 512, False, 4)
    plan._set_step(tuple(tuple(v.shape) for v in inputs.values()), torch.bfloat16, torch.bfloat16)
    plan._device_index = -1  # what get_device() says of a CPU tensor
    assert plan.num_splits == 3
    out = torch.empty(2, 1, 16, 512, dtype=torch.bfloat16)
    lse = torch.empty(2, 16, 1)
    got = gpu.decode(**inputs, head_dim_v=512, softmax_scale=SCALE, plan=plan, out=out, lse=lse)
    assert got[0] is out and got[1] is lse
    pointers = [t.data_ptr() for t in (*inputs.values(), out, lse)]
    assert fake.runs == [(*pointers, SCALE, 0, 1234, plan._err, gpu._ERROR_BYTES)]

    def rejects(message, **changes):
        args = dict(inputs, head_dim_v=512, softmax_scale=SCALE, plan=plan, out=out, lse=lse)
        args.update(changes)
        with pytest.raises(ValueError, match=message):
            gpu.decode(**args)

    rejects(r"the plan was made for \[\[2, 1, 16, 576\]", q=torch.zeros(1, 1, 16, 576, dtype=torch.bfloat16))
    rejects("q has dtype torch.float16; the plan was made for torch.bfloat16", q=inputs["q"].half())
    rejects("block_table has dtype torch.int64", block_table=inputs["block_table"].long())
    rejects("seq_lens must be a torch tensor", seq_lens=[0, 0])
    rejects("q must be a contiguous tensor on the plan's device",
            q=inputs["q"].repeat(1, 1, 1, 2)[..., ::2])
    rejects(r"head_dim_v and causal must be the plan's \(512, False\)", causal=True)
    rejects(r"out must be a contiguous torch.bfloat16 tensor of shape \[2, 1, 16, 512\]",
            out=torch.empty(2, 1, 16, 512))
    rejects(r"lse must be a contiguous torch.float32 tensor of shape \[2, 16, 1\]", lse=torch.empty(2, 1, 16))
    rejects("softmax_scale must be a number", softmax_scale="big")
    rejects("kv_cache has dtype torch.float16; the plan was made for torch.bfloat16",
            kv_cache=inputs["kv_cache"].half())
    rejects(r"the plan was made for \[\[2, 1, 16, 576\], \[4, 64, 576\]",
            kv_cache=torch.zeros(9, 64, 576, dtype=torch.bfloat16))
    assert len(fake.runs) == 1, "a rejected call launches nothing"
    # Another cache of the planned kind is checked, then launched at its own address (the cache checked last
    # passes on identity; a rejected one never becomes that cache).
    other = inputs["kv_cache"].clone()
    gpu.decode(**dict(inputs, kv_cache=other), head_dim_v=512, softmax_scale=SCALE, plan=plan, out=out, lse=lse)
    gpu.decode(**inputs, head_dim_v=512, softmax_scale=SCALE, plan=plan, out=out, lse=lse)
    assert [run[1] for run in fake.runs] == [inputs["kv_cache"].data_ptr(), other.data_ptr(),
                                             inputs["kv_cache"].data_ptr()]
