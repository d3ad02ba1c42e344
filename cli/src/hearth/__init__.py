"""Hearth: the command line, the local stack, the fleet simulator and the benchmarks."""
