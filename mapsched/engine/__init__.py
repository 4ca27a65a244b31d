"""The method machinery: the registry every method registers in, the solve context a method
runs under, interrupts and time limits, relocation costs, Dask executors and the HiGHS LP
helper."""
