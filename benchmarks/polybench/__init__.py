"""The paper's PolyBench/OpenMP kernels and Blackscholes, written for pptmc, with their build and run helpers."""
