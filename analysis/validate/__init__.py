"""Predicted hit rates against the ground truth of real multithreaded runs."""
