"""The application on top of the benchmarks and methods: the ``unlearn`` command line, the demo, reports and plots,
and the ``unlearn run`` pipeline (train -> evaluate -> model card -> Hub)."""
