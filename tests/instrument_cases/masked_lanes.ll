; Every llvm.masked.* memory intrinsic on 4 x double, with a run-time mask (the low 4 bits of
; argv[1]) and a constant one. Written in clang-19's syntax (alignment operands); the x86-64
; backend scalarises them without AVX, so it runs on any x86-64 CPU.
; Prints the array addresses to stderr. Usage: masked_lanes BITS
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@A = global [64 x double] zeroinitializer, align 16
@B = global [64 x double] zeroinitializer, align 16
@fn = global ptr @OUT__1__1__
@pa = global ptr @A  ; read volatile, so -O2 cannot prove the masked load dereferenceable
@stderr = external global ptr
@.fmt = private constant [16 x i8] c"ADDR A=%p B=%p\0A\00"

define internal void @OUT__1__1__(ptr %arg) {
entry:
  %bits = load i32, ptr %arg, align 4
  %low = trunc i32 %bits to i4
  %mask = bitcast i4 %low to <4 x i1>
  %pa = load volatile ptr, ptr @pa, align 8
  %v = call <4 x double> @llvm.masked.load.v4f64.p0(ptr %pa, i32 8, <4 x i1> %mask, <4 x double> zeroinitializer)
  call void @llvm.masked.store.v4f64.p0(<4 x double> %v, ptr getelementptr (i8, ptr @B, i64 32), i32 8, <4 x i1> %mask)
  %gp = getelementptr double, ptr @A, <4 x i64> <i64 7, i64 3, i64 12, i64 1>
  %g = call <4 x double> @llvm.masked.gather.v4f64.v4p0(<4 x ptr> %gp, i32 8, <4 x i1> %mask, <4 x double> zeroinitializer)
  %sp = getelementptr double, ptr @B, <4 x i64> <i64 20, i64 30, i64 25, i64 21>
  call void @llvm.masked.scatter.v4f64.v4p0(<4 x double> %g, <4 x ptr> %sp, i32 8, <4 x i1> %mask)
  %e = call <4 x double> @llvm.masked.expandload.v4f64(ptr getelementptr (i8, ptr @A, i64 128), <4 x i1> %mask, <4 x double> zeroinitializer)
  call void @llvm.masked.compressstore.v4f64(<4 x double> %e, ptr getelementptr (i8, ptr @B, i64 256), <4 x i1> %mask)
  %c = call <4 x double> @llvm.masked.gather.v4f64.v4p0(<4 x ptr> %sp, i32 8, <4 x i1> <i1 true, i1 false, i1 true, i1 true>, <4 x double> zeroinitializer)
  %s = fadd <4 x double> %c, %e
  store <4 x double> %s, ptr getelementptr (i8, ptr @B, i64 384), align 8
  ret void
}

define i32 @main(i32 %argc, ptr %argv) {
entry:
  %bits = alloca i32, align 4
  %p1 = getelementptr ptr, ptr %argv, i64 1
  %s1 = load ptr, ptr %p1, align 8
  %v = call i32 @atoi(ptr %s1)
  store i32 %v, ptr %bits, align 4
  %err = load ptr, ptr @stderr, align 8
  %r = call i32 (ptr, ptr, ...) @fprintf(ptr %err, ptr @.fmt, ptr @A, ptr @B)
  %f = load volatile ptr, ptr @fn, align 8
  call void %f(ptr %bits)
  ret i32 0
}

declare i32 @atoi(ptr)
declare i32 @fprintf(ptr, ptr, ...)
declare <4 x double> @llvm.masked.load.v4f64.p0(ptr, i32 immarg, <4 x i1>, <4 x double>)
declare void @llvm.masked.store.v4f64.p0(<4 x double>, ptr, i32 immarg, <4 x i1>)
declare <4 x double> @llvm.masked.gather.v4f64.v4p0(<4 x ptr>, i32 immarg, <4 x i1>, <4 x double>)
declare void @llvm.masked.scatter.v4f64.v4p0(<4 x double>, <4 x ptr>, i32 immarg, <4 x i1>)
declare <4 x double> @llvm.masked.expandload.v4f64(ptr, <4 x i1>, <4 x double>)
declare void @llvm.masked.compressstore.v4f64(<4 x double>, ptr, <4 x i1>)
