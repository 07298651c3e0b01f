"""A local cluster of real parts on loopback (docs/testing.md "The local cluster"): etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok's nodes and pods, JobSet's and Kueue's controllers with their webhooks,
each built from its Go module at a pinned version (``components.py``) and started by ``parts.py``."""
