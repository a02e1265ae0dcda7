"""open-unlearning evaluation folders in and out: :mod:`.reader` reads them as runs (``unlearn report``,
``unlearn ci``), :mod:`.writer` writes one of our runs as one (``unlearn export-ou``)."""
