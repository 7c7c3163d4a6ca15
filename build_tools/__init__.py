"""Build the rocm / rocm-sdk-* Python distributions from a TheRock artifact tree."""
