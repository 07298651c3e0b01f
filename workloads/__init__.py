"""The workflow's steps (convert, train, export and the optional ones), built on the platform:

- ``workloads.build``: pure builders of each step's argv, scripts and JobSet, named by what it runs;
- ``workloads.workflow``: the component that registers the steps in order and waits for each;
- ``workloads.run``: what a run says (live objects, Kueue's admission, pods, checkpoints, evaluations,
  TensorBoard scalars, artifacts in GCS) and the bounded wait for a step;
- ``workloads.preflight``: the Hugging Face check before anything is created.
"""
