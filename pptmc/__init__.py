"""pptmc: multicore cache and runtime prediction for OpenMP parallel regions from one sequential trace."""
__version__ = "0.1.0"
