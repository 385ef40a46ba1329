"""Basic-block counts from branch probabilities, and scaling a profile to a larger input."""
