"""scripts/prefill-bench-table.py, the join of scripts/bench-prefill.sh's raw JSON lines: mla against the
fastest SDPA backend that ran each shape, up_proj_kv against cuBLAS per T, the end-to-end split. Runs on
the CPU over lines in the formats mla-prefill-bench, bench_prefill_sdpa.py and bench-gemm-peer.py print."""
import json

from script_tables import run_script, table_row


def write(path, lines, noise=""):
    with open(path, "w") as f:
        f.write(noise)
        for line in lines:
            f.write(json.dumps(line) + "\n")


def table(raw):
    return run_script("prefill-bench-table.py", raw)


def test_mha_ratio_uses_the_fastest_backend_that_ran(tmp_path):
    write(tmp_path / "mla-mha.jsonl", [
        dict(backend="mla", b=1, s=4096, causal=True, ms=2.0, tflops=100.0),
        dict(backend="mla", b=2, s=8192, causal=False, ms=10.0, tflops=200.0)])
    write(tmp_path / "sdpa.jsonl", [
        dict(backend="cudnn", b=1, s=4096, causal=True, v_padded=False, ms=1.0, tflops=200.0),
        dict(backend="flash", b=1, s=4096, causal=True, v_padded=True, ms=1.5, tflops=133.0),
        dict(backend="efficient", b=1, s=4096, causal=True, error="refused"),
        dict(backend="flash", b=1, s=8192, causal=True, v_padded=False, ms=0.1, tflops=9.0)],
        noise="a warning from torch\n")
    text = table(tmp_path)
    assert table_row(text, "| (1, 4096, causal)")[3:] == ["cudnn", "1.0000", "200.0", "0.500x"]
    # No SDPA line for the non-causal shape (the (1, 8192) line is another shape).
    assert table_row(text, "| (2, 8192, full)")[3:] == ["-", "-", "-", "-"]
    assert "up_proj_kv" not in text and "chunked prefill" not in text


def test_up_proj_and_e2e_tables(tmp_path):
    write(tmp_path / "mla-up-proj-kv.jsonl", [
        dict(backend="mla", op="up_proj_kv", T=4096, ms=0.5, tflops=550.0),
        dict(backend="mla", op="up_proj_kv", T=16384, ms=2.5, tflops=440.0)])
    write(tmp_path / "cublas.jsonl", [dict(backend="cublas", op="up_proj_kv", T=4096, ms=0.4, tflops=690.0)])
    write(tmp_path / "mla-e2e.jsonl", [dict(
        mode="e2e", format="fp8_ds_mla", requests=4, new_tokens=2048, context=16384, workspace_rows=65536,
        chunks=1, ms=dict(gather=1.0, up_proj_kv=2.0, mha_causal=3.0, mha_context=4.0, merge=0.0),
        total_ms=10.0, tflops=50.0)])
    text = table(tmp_path)
    assert table_row(text, "| 4096")[3:] == ["0.4000", "690.0", "0.800x"]
    assert table_row(text, "| 16384")[3:] == ["-", "-", "-"]
    assert "4 x 2048 new tokens over 16384 cached, workspace 65536 rows" in text
    assert table_row(text, "| fp8_ds_mla") == ["fp8_ds_mla", "1", "1.000 (10%)", "2.000 (20%)", "3.000 (30%)",
                                         "4.000 (40%)", "0.000 (0%)", "10.000", "50.0"]
    assert "mha (ratio" not in text
