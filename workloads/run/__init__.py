"""What a run says and how `pulumi up` follows it: the steps' live objects and Kueue's admission
(``live_state``), their pods (``pods``), failures (``failures``), the bounded wait (``waiting``), the
checkpoints (``checkpoint_scan``, whose source the export step also runs), evaluations and scalars, run data
and artifacts in GCS. Plain functions and bounded reads; no Pulumi."""
