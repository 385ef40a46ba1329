"""Shipped machine files (TOML); a package only so packaging picks them up."""
