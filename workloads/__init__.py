"""The workflow's steps (convert, train, export and the optional ones), built on the platform:

- ``workloads.specs``: each step's specification, pure builders of its argv, scripts and JobSet, named by what it
  runs;
- ``workloads.container``: the programs that run inside the step containers (files of each step's ConfigMap);
- ``workloads.workflow``: the component that registers the steps in order and waits for each;
- ``workloads.observe``: what a run says (live objects, Kueue's admission, pods, start-up, checkpoints,
  evaluations, TensorBoard scalars, artifacts in GCS) and the bounded wait for a step;
- ``workloads.preflight``: the Hugging Face check before anything is created.
"""
