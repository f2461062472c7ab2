"""durastate benchmarks: each comparison runs side by side in one run (ratios and medians, never one time)."""
