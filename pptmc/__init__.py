"""pptmc: multicore cache and runtime prediction for OpenMP parallel regions from one sequential trace."""
from common.version import VERSION as __version__

__all__ = ["__version__"]
