"""The bottom layer: plain data and validation, read by everything above (no Pulumi, no network).

The typed settings every builder takes (``core.settings``) and their validation from raw stack config
(``core.config``), the fact tables of the things we deploy (TPU slices, machine families, models,
training knobs, MaxText 0.2.5's configuration keys), the cost model (``core.estimate``), the names both
sides of a cluster contract use (``core.names``), and the policies every part follows: network budgets
(``deadline``), reading outside input with limits (``inputs``), writing an output folder (``outdir``),
scrubbing what is shown (``redact``). The policy pack installs this package (``pyproject.toml``).
"""
