"""What a run says, read from the cluster and the bucket, for `pulumi up` and the operator's tools: the steps'
live objects and Kueue's admission (``live_state``), their pods (``pod_state``), failures (``failures``), the
bounded wait (``waiting``), start-up (``startup``), the checkpoints and artifacts in GCS (``artifacts``,
``exported``), evaluations, scalars, plots and run data. Plain functions and bounded reads; no Pulumi. The
programs that run inside the step containers are ``workloads.container``'s."""
