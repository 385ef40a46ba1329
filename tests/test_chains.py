"""Loop-carried dependence chains found in IR text (passes/chains.py), against hand-read loops."""
from __future__ import annotations

from passes.chains import loop_carried_chain, parse_inst
from passes.irtext import attribute_groups, has_fma


def block(lines: list[str]):
    """Insts of a block from (opcode, text) pairs given as 'opcode|text'."""
    return [parse_inst(*line.split("|", 1)) for line in lines]


REDUCTION = block([
    "phi|%iv = phi i64 [ 0, %pre ], [ %iv.next, %body ]",
    "phi|%s = phi double [ 0.0, %pre ], [ %s2, %body ]",
    "getelementptr|%p = getelementptr inbounds double, ptr %a, i64 %iv",
    "load|%x = load double, ptr %p, align 8",
    "fmul|%y = fmul double %x, %x",
    "call|%s1 = call double @llvm.fmuladd.f64(double %x, double %y, double %s)",
    "fadd|%s2 = fadd double %s1, %x",
    "add|%iv.next = add nuw i64 %iv, 1",
    "icmp|%c = icmp eq i64 %iv.next, %n",
    "br|br i1 %c, label %exit, label %body",
])


def test_register_reduction_chain():
    # s -> fmuladd (addend: only the add without FMA) -> fadd -> s; the fmul is off the chain
    assert loop_carried_chain("body", REDUCTION, fused=False) == {"fp_add": 2}
    assert loop_carried_chain("body", REDUCTION, fused=True) == {"fp_fma": 1, "fp_add": 1}


def test_not_a_self_loop_has_no_chain():
    exits = REDUCTION[:-1] + block(["br|br i1 %c, label %exit, label %other"])
    assert loop_carried_chain("body", exits) == {}


def test_chain_through_memory_pays_a_load():
    insts = block([
        "phi|%i = phi i64 [ 0, %pre ], [ %i1, %loop ]",
        "load|%v = load double, ptr %acc, align 8",
        "fdiv|%w = fdiv double %v, %d",
        "store|store double %w, ptr %acc, align 8",
        "add|%i1 = add i64 %i, 1",
        "icmp|%c = icmp slt i64 %i1, %n",
        "br|br i1 %c, label %loop, label %out",
    ])
    assert loop_carried_chain("loop", insts) == {"fp_div": 1, "load": 1}


def test_induction_only_loop_has_an_integer_chain():
    insts = block([
        "phi|%i = phi i64 [ 0, %pre ], [ %i1, %loop ]",
        "getelementptr|%p = getelementptr double, ptr %a, i64 %i",
        "store|store double 0.0, ptr %p, align 8",
        "add|%i1 = add i64 %i, 1",
        "icmp|%c = icmp slt i64 %i1, %n",
        "br|br i1 %c, label %loop, label %out",
    ])
    assert loop_carried_chain("loop", insts) == {"int_add": 1}


def test_fma_target_feature_detection():
    lines = ['define void @f() #3 {', '}',
             'attributes #3 = { nounwind "target-features"="+cmov,+sse2,+x87" }',
             'attributes #4 = { nounwind "target-features"="+avx2,+fma,+sse2" }']
    groups = attribute_groups(lines)
    assert has_fma(lines[0], groups) is False
    assert has_fma('define void @g() #4 {', groups) is True
