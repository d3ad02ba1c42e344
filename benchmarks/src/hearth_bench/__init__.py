"""The benchmarks (`hearth bench ...`): speed measured against floors measured in the same run."""
