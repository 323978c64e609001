"""scripts/sass.py, SASS of the GPU kernels here: the cubin header rewrite CUDA 11.8's nvdisasm needs, the
split of nvdisasm's listing into kernels, the opcode histogram and the loops (mbarrier retry stubs are not
loops), and the cubins of a host program's .nv_fatbin section (a peer binary's kernels). Runs on the CPU
over a listing in nvdisasm's format and a synthetic ELF file; the end-to-end run needs ptxas and nvdisasm
(scripts/install-nvdisasm.sh) and is skipped without them."""
import importlib.util
import os
import shutil
import struct
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "sass.py")


def load():
    spec = importlib.util.spec_from_file_location("sass_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LISTING = """
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
\t.section\t.text.first,"ax",@progbits
.text.first:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
.L_x_1:
        /*0020*/                   FADD R2, R2, R0 ;
        /*0030*/                   FADD R2, R2, R0 ;
        /*0040*/               @P0 BRA `(.L_x_9) ;
.L_x_2:
        /*0050*/                   ISETP.NE.AND P1, PT, R2, RZ, PT ;
        /*0060*/               @P1 BRA `(.L_x_1) ;
        /*0070*/                   EXIT ;
.L_x_9:
        /*0080*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3 ;
        /*0090*/                   NANOSLEEP 0x20 ;
        /*00a0*/                   BRA `(.L_x_2) ;
        /*00b0*/                   NOP;
\t.section\t.text.second,"ax",@progbits
.text.second:
        /*0000*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;
        /*0010*/              @!P2 EXIT ;
"""


def test_splits_kernels_and_counts_opcodes():
    sass = load()
    kernels = sass.split_kernels(LISTING)
    assert list(kernels) == ["first", "second"]
    first = sass.histogram(kernels["first"])
    # NOP padding is not counted; predicated instructions count by opcode.
    assert first == {"LDC": 1, "S2R": 1, "FADD": 2, "BRA": 3, "ISETP": 1, "EXIT": 1, "SYNCS": 1, "NANOSLEEP": 1}
    assert sass.histogram(kernels["second"]) == {"HGMMA": 1, "EXIT": 1}


def test_loops_skip_the_out_of_line_barrier_retry():
    sass = load()
    lines = sass.split_kernels(LISTING)["first"]
    found = sass.loops(lines)
    # The one loop is .L_x_1 .. the @P1 branch; the retry stub's branch back to .L_x_2 is not a loop.
    assert [(label, sass.histogram(lines[a:b + 1])["FADD"]) for label, a, b in found] == [(".L_x_1", 2)]


def test_header_rewrite_names_sm90_abi7_and_keeps_the_code():
    sass = load()
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    header[8] = 8  # CUDA 13's ELF ABI version
    struct.pack_into("<I", header, 0x30, 0x6005A04)
    body = bytes(range(256))
    out = sass.as_abi7_sm90(bytes(header) + body)
    assert out[8] == 7
    assert struct.unpack_from("<I", out, 0x30)[0] == 0x005A055A
    assert out[64:] == body and out[:8] == bytes(header[:8])
    with pytest.raises(ValueError):
        sass.as_abi7_sm90(b"not an elf" + bytes(64))


NVDISASM = os.path.join(ROOT, "tools", "cuda-11.8", "bin", "nvdisasm")
PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


@pytest.mark.skipif(not (os.access(NVDISASM, os.X_OK) and os.access(PTXAS, os.X_OK)),
                    reason="needs CUDA's ptxas and nvdisasm (bash scripts/install-nvdisasm.sh)")
def test_end_to_end_on_a_ptx_kernel(tmp_path):
    ptx = tmp_path / "k.ptx"
    ptx.write_text("""
.version 8.0
.target sm_90a
.address_size 64
.visible .entry twice(.param .u64 p) {
  .reg .b64 %rd<4>; .reg .b32 %r<2>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [p];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd2, %rd2, %rd3;
  ld.global.f32 %f1, [%rd2];
  add.f32 %f2, %f1, %f1;
  st.global.f32 [%rd2], %f2;
  ret;
}
""")
    result = subprocess.run([sys.executable, SCRIPT, str(ptx), "--nvdisasm", NVDISASM, "--out", str(tmp_path)],
                            capture_output=True, text=True, check=True)
    assert "twice:" in result.stdout and "spill st/ld 0/0 bytes" in result.stdout
    assert "FADD=1" in result.stdout and "LDG=1" in result.stdout and "STG=1" in result.stdout
    assert (tmp_path / "k.0.twice.sass").read_text().count("FADD") == 1


def host_program(sections):
    """A 64-bit little-endian ELF file holding `sections` ({name: bytes}) and a section name table."""
    names = b"\0.shstrtab\0" + b"".join(n.encode() + b"\0" for n in sections)
    blobs = [names] + list(sections.values())
    name_offsets = [1] + [names.index(n.encode() + b"\0") for n in sections]
    body, offsets = b"", []
    for blob in blobs:
        offsets.append(64 + len(body))
        body += blob
    shoff = 64 + len(body)
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, len(blobs) + 1, 1)
    table = bytes(64)  # section 0
    for name, offset, blob in zip(name_offsets, offsets, blobs):
        entry = bytearray(64)
        struct.pack_into("<IIQQQQ", entry, 0, name, 1, 0, 0, offset, len(blob))
        table += bytes(entry)
    return bytes(header) + body + table


def fatbin(payloads):
    """One fatbin container of `payloads`, each behind a 64-byte entry header."""
    entries = b""
    for kind, payload in payloads:
        entry = bytearray(64)
        struct.pack_into("<HHIQ", entry, 0, kind, 0x101, 64, len(payload))
        entries += bytes(entry) + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entries)) + entries


def test_reads_the_cubins_of_a_host_programs_fatbin(tmp_path):
    sass = load()
    cubin, other = b"\x7fELF" + bytes(range(60)), b"\x7fELF" + bytes(28)
    ptx = b".version 8.0\n.target sm_90a\n"
    program = tmp_path / "peer"
    program.write_bytes(host_program({".text": b"\x90" * 16,
                                      ".nv_fatbin": fatbin([(2, cubin), (1, ptx)]) + fatbin([(2, other)])}))
    # The ELF images of every container, in order; the PTX entry is not one.
    assert sass.fatbin_cubins(str(program)) == [cubin, other]
    assert sass.section(program.read_bytes(), ".text") == b"\x90" * 16
    assert sass.section(program.read_bytes(), ".data") is None
    plain = tmp_path / "plain"
    plain.write_bytes(host_program({".text": b"\x90"}))
    with pytest.raises(SystemExit, match="nv_fatbin"):
        sass.fatbin_cubins(str(plain))
