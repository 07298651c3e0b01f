"""An existing cluster's checks (``infra.k8s.fit``) against the local cluster's real API server: the kubeconfig the
stack keeps of the context (``infra.k8s.kubeconfig.context_kubeconfig``, its files inlined) reaches it through the
project's reader, which reads the nodes kwok runs and the CRDs JobSet and Kueue installed; the default stack's slice
fits, and a slice twice as big, or Workload Identity on a cluster without GKE's metadata server, is one line each."""

from __future__ import annotations

import dataclasses

import pytest

from core.tpu import resolve_slice
from infra.k8s import fit
from infra.k8s.kubeconfig import context_kubeconfig
from infra.k8s.live import ClusterReader
from tests.local_cluster import Running, local_cluster
from tools.local_cluster import parts

__all__ = ["local_cluster"]
pytestmark = pytest.mark.slow

NEEDS = fit.Needs(
    context=parts.CONTEXT,
    stack="local",
    jobset_version="0.10.1",
    queued=True,
    shape=resolve_slice("v6e", "ct6e-standard-4t", "4x8"),
    slices=1,
    static_slice=True,
    workload_identity=False,
)


def test_the_local_cluster_fits_the_default_slice_and_says_what_it_lacks_for_more(local_cluster: Running, tmp_path):
    kubeconfig = context_kubeconfig(parts.CONTEXT, {"KUBECONFIG": str(local_cluster.layout.kubeconfig)}, tmp_path)
    reader = ClusterReader(kubeconfig)
    try:
        facts = reader.facts()
    finally:
        reader.close()
    assert fit.fit(facts, NEEDS) == fit.Fit((), ())
    (bigger,) = fit.fit(facts, dataclasses.replace(NEEDS, slices=2)).problems
    assert bigger.startswith("the slice needs 16 TPU hosts (2 x 4x8 tpu-v6e-slice, 4 chips each) and the cluster has 8")
    (identity,) = fit.fit(facts, dataclasses.replace(NEEDS, workload_identity=True)).problems
    assert identity.startswith("no node of the cluster runs GKE's metadata server")
