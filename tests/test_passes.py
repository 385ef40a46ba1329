"""Unit tests of the IR instrumentation pass on small hand-written LLVM IR."""
from __future__ import annotations

import re

import llvmlite.binding as llvm
import pytest

from instrument.build import mark_noinline
from passes.irpass import instrument_ir
from passes.irtext import operand_value, split_top
from common.errors import InputError

IR = r"""
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@G = global [16 x i32] zeroinitializer, align 16
@xomp_trace_enabled = global i32 0, align 4

define void @OUT__1__1__(ptr %0) {
  %a_p = load ptr, ptr %0, align 8
  %n_pp = getelementptr inbounds i8, ptr %0, i64 8
  %n_p = load ptr, ptr %n_pp, align 8
  %n = load i32, ptr %n_p, align 4
  %flag = load i32, ptr @xomp_trace_enabled, align 4
  %c = icmp sgt i32 %n, 0
  br i1 %c, label %loop, label %3

loop:
  %i = phi i64 [ 0, %1 ], [ %inext, %latch ]
  %p = getelementptr inbounds double, ptr %a_p, i64 %i
  %wide.load = load <2 x double>, ptr %p, align 8
  %w = fadd <2 x double> %wide.load, %wide.load
  store <2 x double> %w, ptr %p, align 8
  %g = load i32, ptr getelementptr inbounds (i8, ptr @G, i64 8), align 4
  %sel = and i32 %g, 3
  switch i32 %sel, label %latch [
    i32 0, label %2
    i32 1, label %3
  ]

2:
  %old = atomicrmw add ptr @G, i32 1 seq_cst, align 4
  call void @ext()
  call void @llvm.memcpy.p0.p0.i64(ptr align 8 %a_p, ptr align 4 @G, i64 24, i1 false)
  br label %latch

latch:
  %inext = add nuw i64 %i, 1
  %done = icmp eq i64 %inext, 4
  br i1 %done, label %3, label %loop

3:
  ret void
}

define void @XOMP_helper__OUT__(ptr %p) {
  store i32 1, ptr %p, align 4
  ret void
}

define void @unrelated(ptr %p) {
  store i32 2, ptr %p, align 4
  ret void
}

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @ext()
"""


def test_operand_parsing():
    assert split_top("i32 %a, ptr getelementptr (i8, ptr @G, i64 8), align 4") == [
        "i32 %a", "ptr getelementptr (i8, ptr @G, i64 8)", "align 4"]
    assert split_top("<2 x double> %w, ptr %p") == ["<2 x double> %w", "ptr %p"]
    assert operand_value("ptr noundef nonnull align 16 dereferenceable(64) %a") == "%a"
    assert operand_value("ptr align 8 %0") == "%0"
    assert operand_value("i64 24") == "24"
    assert operand_value("ptr getelementptr inbounds (i8, ptr @G, i64 8)") == "getelementptr inbounds (i8, ptr @G, i64 8)"
    assert operand_value("ptr addrspace(1) %x") is None


@pytest.fixture(scope="module")
def result():
    return instrument_ir(IR, r"OUT__", "trace", "test.ll", {"OUT__1__1__": "shared_var_trace1"})


def test_blocks_labels_and_cfg(result):
    names = [(b.block_id, b.label) for b in result.blocks]
    assert names == [(0, "bb.0"), (1, "loop"), (2, "bb.2"), (3, "latch"), (4, "bb.4"), (5, "shared_var_trace1")]
    succ = {b.label: b.successors for b in result.blocks}
    assert succ == {"bb.0": [1, 4], "loop": [3, 2, 4], "bb.2": [3], "latch": [4, 1], "bb.4": [],
                    "shared_var_trace1": []}
    assert [b.is_shared_var_block for b in result.blocks] == [False] * 5 + [True]
    assert result.blocks[5].host_block == 0
    assert list(result.functions) == ["OUT__1__1__"]  # XOMP_* and non-matching functions are skipped


def test_sites_and_mix(result):
    kinds = [(s.block_id, s.kind, s.size, s.is_store) for s in result.sites]
    assert kinds == [
        (5, "load", 8, False), (5, "load", 8, False),        # shared-variable unpacking via the argument
        (0, "load", 4, False),                               # *n_p: through a loaded pointer, not shared
        (1, "load", 16, False), (1, "store", 16, True), (1, "load", 4, False),
        (2, "atomicrmw", 4, True), (2, "memcpy.src", 24, False), (2, "memcpy.dst", 24, True)]
    loop = result.blocks[1].ops
    assert (loop["load"], loop["store"], loop["fp_add"], loop["vector_width"], loop["branch"]) == (2, 1, 1, 2, 1)
    assert (loop["load_bytes"], loop["store_bytes"]) == (20, 16)
    assert result.blocks[3].ops["int_add"] == 1 and result.blocks[3].ops["cmp"] == 1
    # library calls by callee; intrinsics (memcpy) and the runtime are not counted
    assert result.blocks[2].calls == {"ext": 1} and result.blocks[1].calls == {}


def test_instrumented_text(result):
    text = result.ir_text
    llvm.parse_assembly(text).verify()
    body = text.split("define void @OUT__1__1__", 1)[1].split("\n}\n", 1)[0]
    loop = body.split("\nloop:", 1)[1]
    lines = [ln.strip() for ln in loop.splitlines() if ln.strip()]
    assert lines[0].startswith("%i = phi")  # hooks go after the phis
    assert lines[1] == "call void @__pptmc_bb(i32 1, ptr %__pptmc_prev)"
    assert "call void @__pptmc_mem(i32 5, ptr getelementptr inbounds (i8, ptr @G, i64 8))" in body
    assert "call void @__pptmc_memn(i32 7, ptr @G, i64 24)" in body
    assert "ptr @xomp_trace_enabled)" not in body  # the marker flag is never logged
    assert body.count("__pptmc_fn_exit") == 1
    # a real call is preceded by a sync carrying how many of the block's sites ran before it;
    # intrinsics (memcpy) get none
    assert "call void @__pptmc_sync(i32 1)\n  call void @ext()" in body
    assert body.count("__pptmc_sync") == 1
    helper = text.split("define void @XOMP_helper__OUT__", 1)[1].split("}", 1)[0]
    assert "__pptmc" not in helper


def test_count_mode_has_same_tables(result):
    count = instrument_ir(IR, r"OUT__", "count", "test.ll", {"OUT__1__1__": "shared_var_trace1"})
    assert count.table_hash == result.table_hash
    assert "__pptmc_mem" not in count.ir_text.split("declare void @__pptmc_bb", 1)[0]
    assert "__pptmc_cbb(i32 3" in count.ir_text


def test_errors():
    with pytest.raises(InputError, match="no defined function matches"):
        instrument_ir(IR, r"^nope$")
    with pytest.raises(InputError, match="not a valid regular expression"):
        instrument_ir(IR, r"(")
    with pytest.raises(InputError, match="bad.ll: LLVM IR does not parse"):
        instrument_ir("define void @f( {", r"f", origin="bad.ll")


def test_mark_noinline_drops_alwaysinline():
    ir = ("define internal void @f.omp_outlined(ptr %0) #0 {\n  ret void\n}\n"
          "define void @g() #0 {\n  ret void\n}\n"
          "attributes #0 = { alwaysinline nounwind }\n")
    out = mark_noinline(ir, r"omp_outlined")
    assert re.search(r"@f\.omp_outlined\(ptr %0\) #1 \{", out)
    assert "define void @g() #0 {" in out
    assert "attributes #1 = { noinline nounwind }" in out
    llvm.parse_assembly(out).verify()


MASKED_IR = r"""
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

define void @OUT__m(ptr %p, <2 x ptr> %ps, <2 x i1> %m) {
  %v = call <2 x float> @llvm.masked.load.v2f32.p0(ptr %p, i32 4, <2 x i1> %m, <2 x float> poison)
  call void @llvm.masked.scatter.v2f32.v2p0(<2 x float> %v, <2 x ptr> %ps, i32 4, <2 x i1> <i1 true, i1 false>)
  %e = call <2 x float> @llvm.masked.expandload.v2f32(ptr %p, <2 x i1> %m, <2 x float> poison)
  ret void
}

declare <2 x float> @llvm.masked.load.v2f32.p0(ptr, i32 immarg, <2 x i1>, <2 x float>)
declare void @llvm.masked.scatter.v2f32.v2p0(<2 x float>, <2 x ptr>, i32 immarg, <2 x i1>)
declare <2 x float> @llvm.masked.expandload.v2f32(ptr, <2 x i1>, <2 x float>)
"""


def test_masked_intrinsics_get_one_site_per_lane():
    res = instrument_ir(MASKED_IR, r"OUT__", "trace", "masked.ll")
    assert [(s.kind, s.size, s.is_store) for s in res.sites] == [
        ("masked.load", 4, False)] * 2 + [("masked.scatter", 4, True)] * 2 + [("masked.expandload", 4, False)] * 2
    body = res.ir_text.split("define void @OUT__m", 1)[1].split("\n}\n", 1)[0]
    # lane k of the contiguous load is at p + 4k and is logged only when mask bit k is set
    assert "%__pptmc_a1 = getelementptr i8, ptr %p, i64 4" in body
    assert "%__pptmc_m1 = extractelement <2 x i1> %m, i64 1" in body
    assert "call void @__pptmc_lane(i32 1, ptr %__pptmc_a1, i64 4, i1 %__pptmc_m1)" in body
    # scatter lanes take their pointer from the vector; the constant mask is reused as spelled
    assert "%__pptmc_a3 = extractelement <2 x ptr> %ps, i64 1" in body
    assert "%__pptmc_m3 = extractelement <2 x i1> <i1 true, i1 false>, i64 1" in body
    # expandload lane 1 reads element (active lanes before it): rank from lane 0's mask bit
    assert "%__pptmc_r4 = add i64 0, %__pptmc_z4" in body and "%__pptmc_o5 = mul i64 %__pptmc_r4, 4" in body
    assert res.blocks[0].ops["load"] == 4 and res.blocks[0].ops["store_bytes"] == 8
    count = instrument_ir(MASKED_IR, r"OUT__", "count", "masked.ll")
    assert count.table_hash == res.table_hash and "__pptmc_lane(" not in count.ir_text.split("declare", 1)[0]


ATOMIC_IR = r"""
target triple = "x86_64-pc-linux-gnu"

define i32 @OUT__1__1__(ptr %p) {
  %v = load atomic i32, ptr %p monotonic, align 4
  %w = load atomic i32, ptr %p syncscope("singlethread") acquire, align 4
  store atomic i32 %v, ptr %p seq_cst, align 4
  %s = add i32 %v, %w
  ret i32 %s
}
"""


def test_atomic_load_and_store_operands_drop_their_ordering():
    """`load atomic ..., ptr %p monotonic`: the ordering is not part of the pointer (it broke the build)."""
    assert operand_value("ptr %p monotonic") == "%p"
    assert operand_value("ptr %p syncscope(\"singlethread\") acquire") == "%p"
    result = instrument_ir(ATOMIC_IR, r"OUT__", "trace", "atomic.ll", {})
    assert [(s.kind, s.size, s.is_store) for s in result.sites] == [
        ("load", 4, False), ("load", 4, False), ("store", 4, True)]
    llvm.parse_assembly(result.ir_text).verify()


BARRIER_IR = r"""
define void @OUT__1__1__(ptr %0) {
  call void @XOMP_barrier()
  call void @XOMP_barrier()
  call void @XOMP_loop_end(ptr %0, i32 noundef 1)
  br label %next

next:
  call void @XOMP_loop_end(ptr %0, i32 noundef 0)
  call void @work()
  ret void
}

declare void @XOMP_barrier()
declare void @XOMP_loop_end(ptr, i32)
declare void @work()
"""


def test_explicit_barriers_are_counted_apart_from_library_calls():
    """`#pragma omp barrier` becomes XOMP_barrier() and a nowait loop ends with XOMP_loop_end(&s, 1): the
    runtime model needs how many barriers run."""
    blocks = instrument_ir(BARRIER_IR, r"OUT__", "trace", "b.ll", {}).blocks
    assert [(b.barriers, b.nowait, b.calls) for b in blocks] == [(2, 1, {}), (0, 0, {"work": 1})]


def test_a_module_with_libomp_team_calls_gets_the_counting_block_hook():
    """A program calling libomp's team entry points (the validator's native build) gets `__pptmc_bbt`, which
    counts the thread's references for the equal-speed turns, and the call goes through the turns' wrapper;
    a translated one (no such calls, the fixture) keeps the plain `__pptmc_bb`; count mode is unchanged."""
    ir = IR.replace("  call void @ext()\n", "  call void @ext()\n  call void @__kmpc_barrier(ptr null, i32 0)\n")
    ir += "declare void @__kmpc_barrier(ptr, i32)\n"
    traced = instrument_ir(ir, r"OUT__", "trace", "test.ll", {"OUT__1__1__": "shared_var_trace1"})
    llvm.parse_assembly(traced.ir_text).verify()
    body = traced.ir_text.split("define void @OUT__1__1__", 1)[1].split("\n}\n", 1)[0]
    assert "call void @__pptmc_bbt(i32 1, ptr %__pptmc_prev)" in body and "@__pptmc_bb(" not in body
    assert "call void @__pptmc_turn___kmpc_barrier(ptr null, i32 0)" in body
    counted = instrument_ir(ir, r"OUT__", "count", "test.ll", {"OUT__1__1__": "shared_var_trace1"})
    assert "__pptmc_cbb(i32 1" in counted.ir_text and "__pptmc_bbt(" not in counted.ir_text.split("declare", 1)[0]
    runtime_only = IR.replace("  store i32 1, ptr %p, align 4\n", "  call void @__kmpc_barrier(ptr null, i32 0)\n")
    assert runtime_only != IR  # an uninstrumented function (the XOMP runtime's) calls libomp: plain hook
    plain = instrument_ir(runtime_only + "declare void @__kmpc_barrier(ptr, i32)\n", r"OUT__", "trace", "test.ll",
                          {"OUT__1__1__": "shared_var_trace1"})
    assert "call void @__pptmc_bb(i32 1," in plain.ir_text and "call void @__pptmc_bbt(" not in plain.ir_text
