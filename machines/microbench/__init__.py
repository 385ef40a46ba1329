"""C microbenchmarks that `pptmc machines detect` compiles and runs; a package only so packaging ships them."""
