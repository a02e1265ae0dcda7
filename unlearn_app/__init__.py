"""The application on top of the benchmarks and methods: the ``unlearn`` command line, the demo, reports and plots,
and the ``unlearn run`` pipeline (train -> evaluate -> model card -> Hub)."""

from harness_ext.quiet import silence as _silence_noise

_silence_noise()  # torch / torchao start-up messages that say nothing to the user (see harness_ext.quiet)
