"""In-core loop bound (analysis/runtime/incore.py): LLVM assembly comments parsed, llvm-mca driven, the bound
combined with the per-block model, and the build's assembly side file on a real program."""
from __future__ import annotations

from pathlib import Path

import pytest

from analysis.runtime import incore
from analysis.runtime import model as rm
from analysis.runtime.inputs import BlockWork, op_counts_from_blocks
from analysis.runtime.terms.block_core import block_issue_cycles, chain_overlap
from analysis.runtime.terms.loop_bound import in_core_cycles_per_iteration, in_core_extra_cycles
from instrument import assembly_path, build_instrumented, run_trace
from machines import load_machine
from machines.loader import machine_to_dict, validate_machine_dict
from common.errors import InputError

HAVE_MCA = incore.find_mca() is not None
needs_mca = pytest.mark.skipif(not HAVE_MCA, reason="llvm-mca (package llvm-19) not installed")

# Shaped like clang-19 -S output: an outer loop (BB1_2) around an innermost one (BB1_4) whose body spans
# a named block, a codegen-split unnamed block and a rarely taken branch; a second function not traced.
ASM = """\
\t.text
OUT__1__7__:                            # @OUT__1__7__
\t.cfi_startproc
# %bb.0:                                # %entry
\tpushq\t%rbx
\tjmp\t.LBB1_2
.LBB1_2:                                # %for.outer
                                        # =>This Loop Header: Depth=1
                                        #     Child Loop BB1_4 Depth 2
\txorl\t%ecx, %ecx
\t.p2align\t4, 0x90
.LBB1_4:                                # %for.body
                                        #   Parent Loop BB1_2 Depth=1
                                        # =>  This Inner Loop Header: Depth=2
\tmovsd\t(%rdi,%rcx,8), %xmm1           # xmm1 = mem[0],zero
\taddsd\t%xmm1, %xmm0
# %bb.5:                                #   in Loop: Header=BB1_4 Depth=2
\tincq\t%rcx
\tcmpq\t%rcx, %rsi
\tjne\t.LBB1_7
.LBB1_6:                                # %if.rare
                                        #   in Loop: Header=BB1_4 Depth=2
\tcallq\tprintf@PLT
\tmulsd\t%xmm2, %xmm2
.LBB1_7:                                # %if.trace
                                        #   in Loop: Header=BB1_4 Depth=2
\tcallq\tXOMP_trace_iteration@PLT
\tjmp\t.LBB1_4
.LBB1_8:                                # %for.end
                                        #   in Loop: Header=BB1_2 Depth=1
\tjmp\t.LBB1_2
.Lfunc_end1:
main:                                   # @main
.LBB2_1:                                # %loop
                                        # =>This Inner Loop Header: Depth=1
\tjmp\t.LBB2_1
.Lfunc_end2:
"""


def test_parse_finds_innermost_loops_of_traced_functions():
    funcs = incore.parse_functions(ASM)
    assert list(funcs) == ["OUT__1__7__"]
    names = [(b.name, b.ir_label, b.loop_header) for b in funcs["OUT__1__7__"]]
    assert names == [("bb.0", "entry", None), ("BB1_2", "for.outer", None), ("BB1_4", "for.body", "BB1_4"),
                     ("bb.5", None, "BB1_4"), ("BB1_6", "if.rare", "BB1_4"), ("BB1_7", "if.trace", "BB1_4"),
                     ("BB1_8", "for.end", "BB1_2")]
    assert funcs["OUT__1__7__"][2].instructions == ("movsd\t(%rdi,%rcx,8), %xmm1", "addsd\t%xmm1, %xmm0")
    loops = incore.innermost_loops(funcs)
    assert [(lp.header, [b.name for b in lp.blocks]) for lp in loops] == [
        ("BB1_4", ["BB1_4", "bb.5", "BB1_6", "BB1_7"])]


def test_loop_body_leaves_out_rare_blocks_and_trace_markers():
    (loop,) = incore.innermost_loops(incore.parse_functions(ASM))
    body, iterations, labels = incore.loop_body(loop, {"for.body": 100, "if.rare": 10, "if.trace": 100})
    assert iterations == 100
    assert labels == {"for.body", "if.trace"}
    assert body == ("movsd\t(%rdi,%rcx,8), %xmm1", "addsd\t%xmm1, %xmm0", "incq\t%rcx", "cmpq\t%rcx, %rsi",
                    "jne\t.LBB1_7")
    body, _, labels = incore.loop_body(loop, {"for.body": 100, "if.rare": 90, "if.trace": 0})
    assert labels == {"for.body", "if.rare"} and "mulsd\t%xmm2, %xmm2" in body
    assert not any(i.startswith("call") for i in body)


@needs_mca
def test_mca_regions_keep_their_order_and_see_dependences():
    chain = ["addq %rax, %rax"] * 4                       # 4 dependent adds: >= 4 cycles per iteration
    independent = ["addq %rax, %rax", "addq %rbx, %rbx", "addq %rcx, %rcx", "addq %rdx, %rdx"]
    divs = ["divsd %xmm0, %xmm0"]
    res = incore.mca_throughputs([chain, independent, divs], "haswell")
    assert res[0].cycles_per_iteration == pytest.approx(4.0, abs=0.2)
    assert res[1].cycles_per_iteration < 1.6 and res[1].resource_cycles == pytest.approx(1.0)
    assert res[2].cycles_per_iteration > 10                   # a divide's latency
    with pytest.raises(InputError, match="llvm_mcpu"):
        incore.mca_throughputs([chain], "no-such-cpu")


def _machine(**core):
    """The shipped Haswell with the given [core] figures (none: no [core] table, so no in-core bound)."""
    data = machine_to_dict(load_machine("haswell-i7-5960x"))
    data.pop("core", None)
    if core:
        data["core"] = {**core, "source": "test"}
    return validate_machine_dict(data, "test")


def test_bound_is_retimed_overlapped_and_never_below_resources():
    """Hand-computed: a reduction of 100 executions whose model issue is 1 cycle (its fp_add chain of 3
    cycles overlapping 3 times); llvm-mca simulated 5 cycles with an fp_add latency of 4."""
    m = _machine(reorder_window_ops=20)
    lat = m.ops["fp_add"].latency
    blk = BlockWork(100, {"fp_add": 1, "load": 1}, {"fp_add": 1}, trip=5.0, block_id=3)
    overlap = chain_overlap(blk, m)                       # 1 + 20 / (5 x 2 ops) = 3
    assert overlap == pytest.approx(3.0)
    issue = block_issue_cycles(blk, m)
    bound = incore.LoopBound(frozenset({3}), 100, cycles_per_iteration=5.0 + 4 - lat, resource_cycles=0.5,
                             mca_latencies={"fp_add": 4.0})
    per_iteration = in_core_cycles_per_iteration(bound, [blk], m)
    assert per_iteration == pytest.approx(5.0 / 3.0)
    assert in_core_extra_cycles([blk], m, [bound]) == pytest.approx(max(0.0, 100 * 5.0 / 3.0 - 100 * issue))
    cheap = incore.LoopBound(frozenset({3}), 100, 0.1, 0.2, {})
    assert in_core_extra_cycles([blk], m, [cheap]) == 0.0   # the model's own figure stands
    wide = incore.LoopBound(frozenset({3}), 100, 0.1, 40.0, {})
    assert in_core_extra_cycles([blk], m, [wide]) == pytest.approx(100 * 40.0 - 100 * issue)


def test_prediction_reports_the_in_core_part():
    m = _machine(llvm_mcpu="haswell")
    blk = BlockWork(1000, {"fp_add": 1, "load": 1}, {}, block_id=1)
    bound = incore.LoopBound(frozenset({1}), 1000, 6.0, 6.0, {})
    ops = op_counts_from_blocks({1: blk.ops}, {1: 1000})
    args = dict(local_hit_rates={"L1": 1.0, "L2": 0.0, "L3": 0.0}, ops=ops, mem_accesses=1000, mem_bytes=8000,
                layout="pipelined", cpu_form="critical-path", blocks=[blk])
    base = rm.predict_runtime(m, 1, **args)
    bounded = rm.predict_runtime(m, 1, **args, loop_bounds=[bound])
    extra = m.cycles_to_seconds(1000 * 6.0 - 1000 * block_issue_cycles(blk, m))
    assert bounded.t_incore_s == pytest.approx(extra)
    assert bounded.t_cpu_s == pytest.approx(base.t_cpu_s + extra)
    assert base.t_incore_s == 0.0


def test_machine_file_llvm_mcpu_is_validated():
    assert _machine(llvm_mcpu="znver2").llvm_mcpu == "znver2"
    with pytest.raises(InputError, match="core.llvm_mcpu"):
        _machine(llvm_mcpu="Zen 2!")
    m = _machine(llvm_mcpu="znver2")
    assert validate_machine_dict(machine_to_dict(m), "round trip") == m


@needs_mca
def test_bounds_of_a_real_build(tmp_path, capfd):
    """The build writes the uninstrumented assembly; the bounds cover traced blocks and count the
    iterations of the loop's header block."""
    case = Path(__file__).parent / "instrument_cases" / "rose_kernel.c"
    binary = build_instrumented(case, tmp_path / "rk").binary
    asm = assembly_path(binary)
    assert "pptmc_" not in asm.read_text()                   # no tracer hooks in the native code
    info = run_trace(binary, ["300"], tmp_path / "t.trace")
    trace = tmp_path / "t.trace"
    bounds = rm.in_core_bounds(_machine(llvm_mcpu="haswell"), rm.RegionRecord.load(trace, binary))
    assert bounds, "the kernel's loops were not found in the assembly"
    for b in bounds:
        assert b.iterations == max(info.block_counts[x] for x in b.blocks)
        assert b.cycles_per_iteration > 0 and b.resource_cycles > 0
    assert rm.in_core_bounds(_machine(), rm.RegionRecord.load(trace, binary)) == ()
    asm.unlink()
    with pytest.raises(InputError, match="assembly side file not found"):
        rm.in_core_bounds(_machine(llvm_mcpu="haswell"), rm.RegionRecord.load(trace, binary))
