"""scripts/decode-bench-table.py, the medians and ratios of a device call's decode benchmark log
(docs/gpu-runs.md): runs on the CPU over lines in the formats mla-bench and flashmla_bench print."""
from script_tables import run_script, table_row

MLA_HEADER = "#   b    N    seq  Sq causal splits       tile  median_ms     min_ms    TFLOPS      GB/s"


def mla_row(b, n, seq, sq, causal, ms):
    return (f"  {b:3d}  {n:3d}  {seq:5d}  {sq:2d}    {'yes' if causal else ' no'}      1 64x2x64x2s"
            f"     {ms:.4f}     {ms - 0.001:.4f}     600.0    2500.0")


def fl_row(b, sq, n, seq, causal, ms):
    return (f"  {b:3d}   {sq}  {n:3d}   {seq:5d}   {causal}    66 |  0.00e+00  0.00e+00  0 0 |     0 |"
            f"   0.14934   0.15386   0.12902 |   488.9  2141.5 |   474.6  2078.7 | steady_fl_ms   {ms:.5f}")


def run(tmp_path, lines):
    log = tmp_path / "bench.log"
    log.write_text("\n".join(lines) + "\n")
    return run_script("decode-bench-table.py", log)


def test_medians_and_speed_per_shape(tmp_path):
    lines = []
    # Three rounds: the median, not the mean, must come out (one outlier per side).
    for r, (a, bb, fl) in enumerate([(0.10, 0.20, 0.11), (0.12, 0.19, 0.12), (0.50, 0.18, 0.90)], 1):
        lines += [f"# variant main round {r}", MLA_HEADER, mla_row(64, 128, 4096, 1, False, a),
                  mla_row(128, 128, 8192, 2, True, a * 2)]
        lines += [f"# variant new round {r}", MLA_HEADER, mla_row(64, 128, 4096, 1, False, bb),
                  mla_row(128, 128, 8192, 2, True, bb * 2)]
        lines += [f"# flashmla round {r}", "   (steady_fl_ms = ...; last column)",
                  fl_row(64, 1, 128, 4096, 0, fl), fl_row(128, 2, 128, 8192, 1, fl * 3)]
    out = run(tmp_path, lines)
    row = table_row(out, "| (64, 128, 4096, 1) |")
    assert row[1:] == ["0.1200", "0.1200", "0.1900", "1.000x", "0.632x"]
    row = table_row(out, "| (128, 128, 8192, 2) causal |")
    assert row[1:] == ["0.3600", "0.2400", "0.3800", "1.500x", "0.947x"]


def test_fp8_ratios_take_bf16_from_auto_or_the_variant(tmp_path):
    lines = ["# variant b round 1", mla_row(132, 128, 8192, 1, False, 0.50)]
    for r in (1, 2, 3):
        lines += [f"# fp8bar a-auto round {r}", mla_row(128, 16, 8192, 1, False, 0.30)]
        lines += [f"# fp8bar a-fp8_e4m3 round {r}", mla_row(128, 16, 8192, 1, False, 0.15 + 0.01 * r)]
        lines += [f"# fp8bar b-fp8_e4m3 round {r}", mla_row(132, 128, 8192, 1, False, 0.55)]
    out = run(tmp_path, lines)
    a = out[out.index("| a: shape"):]
    assert table_row(a, "| (128, 16, 8192, 1) |")[1:] == ["0.3000", "0.1700", "1.765x"]
    b = out[out.index("| b: shape"):]
    assert table_row(b, "| (132, 128, 8192, 1) |")[1:] == ["0.5000", "0.5500", "0.909x"]
    # No FlashMLA section: the speed cells say so instead of inventing a ratio.
    assert table_row(out, "| (132, 128, 8192, 1) |")[1:4:2] == ["-", "-"]


def test_lines_outside_a_section_are_ignored(tmp_path):
    out = run(tmp_path, [mla_row(1, 16, 64, 1, False, 9.0), "# variant v round 1", "noise",
                         mla_row(2, 16, 64, 1, False, 0.25)])
    assert "(1, 16, 64, 1)" not in out
    assert table_row(out, "| (2, 16, 64, 1) |")[1:] == ["-", "0.2500", "-"]


def test_other_round_sections_end_the_one_before(tmp_path):
    # A tile sweep's rows after an fp8bar section must not count as that format's rows.
    lines = []
    for r in (1, 2, 3):
        lines += [f"# fp8bar a-fp8_ds_mla round {r}", mla_row(128, 16, 8192, 1, False, 0.26)]
        lines += [f"# tile fp8_e4m3-16x4x64x3 round {r}", mla_row(128, 16, 8192, 1, False, 0.20)]
        lines += [f"# fp8bar a-auto round {r}", mla_row(128, 16, 8192, 1, False, 0.40)]
    out = run(tmp_path, lines)
    a = out[out.index("| a: shape"):]
    assert table_row(a, "| (128, 16, 8192, 1) |")[1:] == ["0.4000", "0.2600", "1.538x"]
