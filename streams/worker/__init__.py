"""The detection worker."""
