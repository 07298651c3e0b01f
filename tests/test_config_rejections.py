"""Every bad stack setting exits 2 with one line naming the key, before any resource exists."""

from __future__ import annotations

import copy
import functools
import json
import os
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from core.config import ConfigError, load_settings
from tests.config_boundaries import BOUNDARIES, MESSAGES, boundary_message, many_errors_message, read_messages
from tests.conftest import one, plan_of
from tests.lifecycle_walk import settings
from tests.pure_plan import per_mutant_cache
from tools import stack_files
from tools.plan import main as plan_main

TOKEN_LIKE = "hf_LEAKtestTOKENvalue0123456789abcdefgh"
X = "tpu-rl:training.extraArgs"
EVALUATE = "tpu-rl:workflow.steps.evaluate=true"

# (id, --set overrides, full key the message must name, words the message must contain)
BAD_INPUTS = [
    # -- required and provider keys
    ("project-missing", ["gcp:project="], "gcp:project", "required"),
    ("project-format", ["gcp:project=My_Project"], "gcp:project", "project id"),
    ("project-list", ['gcp:project=["a"]'], "gcp:project", "expected a string, not a list"),
    ("region-format", ["gcp:region=useast"], "gcp:region", "region"),
    ("zone-not-in-region", ["gcp:zone=us-central1-a"], "gcp:zone", "us-east5"),
    ("zone-format", ["gcp:zone=us-east5"], "gcp:zone", "zone such as"),
    # -- names and formats
    ("cluster-digit-first", ["tpu-rl:clusterName=1tpu"], "tpu-rl:clusterName", "lowercase letter first"),
    ("cluster-too-long", ["tpu-rl:clusterName=a" + "b" * 20], "tpu-rl:clusterName", "at most 20"),
    ("cluster-trailing-hyphen", ["tpu-rl:clusterName=tpu-"], "tpu-rl:clusterName", "hyphen"),
    ("cluster-uppercase", ["tpu-rl:clusterName=TpuRl"], "tpu-rl:clusterName", "lowercase"),
    ("cluster-newline", ["tpu-rl:clusterName=tpu\nrl"], "tpu-rl:clusterName", "lowercase"),
    ("cluster-object", ['tpu-rl:clusterName={"a": 1}'], "tpu-rl:clusterName", "not an object"),
    ("bucket-short", ["tpu-rl:bucketName=ab"], "tpu-rl:bucketName", "3-63"),
    ("bucket-google", ["tpu-rl:bucketName=my-google-bucket"], "tpu-rl:bucketName", "google"),
    ("bucket-uppercase", ["tpu-rl:bucketName=Bad_Bucket"], "tpu-rl:bucketName", "lowercase"),
    ("bucket-path", ["tpu-rl:bucketName=../etc"], "tpu-rl:bucketName", "3-63"),
    ("state-backend-scheme", ["tpu-rl:stateBackend=s3://acme-state"], "tpu-rl:stateBackend", "gs://BUCKET"),
    ("state-backend-dotdot", ["tpu-rl:stateBackend=gs://acme-state/../prod"], "tpu-rl:stateBackend", "gs://BUCKET"),
    (
        "state-backend-artifacts",
        ["tpu-rl:stateBackend=gs://my-tpu-dev-project-tpu-rl-dev/state"],
        "tpu-rl:stateBackend",
        "artifacts bucket",
    ),
    (
        "state-backend-hub-cache",
        [
            "tpu-rl:model.hubCache=gs://acme-shared-hub/hub/",
            "tpu-rl:model.hubCacheWriter=prod",
            "tpu-rl:stateBackend=gs://acme-shared-hub",
        ],
        "tpu-rl:stateBackend",
        "Hub cache",
    ),
    ("namespace-format", ["tpu-rl:namespace=Bad_NS"], "tpu-rl:namespace", "DNS-1123"),
    ("namespace-kube", ["tpu-rl:namespace=kube-system"], "tpu-rl:namespace", "GKE-owned"),
    ("namespace-gmp", ["tpu-rl:namespace=gmp-system"], "tpu-rl:namespace", "GKE-owned"),
    ("namespace-gke-managed", ["tpu-rl:namespace=gke-managed-system"], "tpu-rl:namespace", "GKE-owned"),
    ("namespace-default", ["tpu-rl:namespace=default"], "tpu-rl:namespace", "not default"),
    ("namespace-jobset", ["tpu-rl:namespace=jobset-system"], "tpu-rl:namespace", "jobset-system"),
    ("revision-injection", ["tpu-rl:model.revision=main;rm -rf /"], "tpu-rl:model.revision", "branch, tag"),
    ("revision-substitution", ["tpu-rl:model.revision=$(id)"], "tpu-rl:model.revision", "branch, tag"),
    # -- the shared Hub cache: a bucket of its own, one writer (core.config.storage_rules.hub_cache)
    (
        "hub-cache-own-bucket",
        ["tpu-rl:model.hubCache=gs://my-tpu-dev-project-tpu-rl-dev/hub/", "tpu-rl:model.hubCacheWriter=dev"],
        "tpu-rl:model.hubCache",
        "a destroy empties",
    ),
    (
        "hub-cache-no-writer",
        ["tpu-rl:model.hubCache=gs://my-project-tpu-rl-hub/hub/"],
        "tpu-rl:model.hubCacheWriter",
        "required with tpu-rl:model.hubCache",
    ),
    ("hub-cache-writer-alone", ["tpu-rl:model.hubCacheWriter=prod"], "tpu-rl:model.hubCacheWriter", "names none"),
    (
        "hub-cache-writer-format",
        ["tpu-rl:model.hubCache=gs://my-project-tpu-rl-hub/hub/", "tpu-rl:model.hubCacheWriter=prod stack"],
        "tpu-rl:model.hubCacheWriter",
        "a Pulumi stack name",
    ),
    (
        "image-latest",
        ["tpu-rl:images.pathwaysServer=us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"],
        "tpu-rl:images.pathwaysServer",
        ":latest",
    ),
    (
        "image-latest-upper-case",
        ["tpu-rl:images.pathwaysServer=us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:LATEST"],
        "tpu-rl:images.pathwaysServer",
        ":latest",
    ),
    (
        "image-untagged",
        ["tpu-rl:images.maxtext=us-docker.pkg.dev/cloud-tpu-images/maxtext"],
        "tpu-rl:images.maxtext",
        "tag",
    ),
    (
        "image-injection",
        ["tpu-rl:images.maxtext=us-docker.pkg.dev/cloud-tpu-images/m:1`id`"],
        "tpu-rl:images.maxtext",
        "tag",
    ),
    (
        "image-short-digest",
        ["tpu-rl:images.maxtext=us-docker.pkg.dev/cloud-tpu-images/m@sha256:abc"],
        "tpu-rl:images.maxtext",
        "digest",
    ),
    (
        "image-other-registry",
        ["tpu-rl:images.maxtext=docker.io/someone/tpu_post_training:0.2.5"],
        "tpu-rl:images.maxtext",
        "not from an allowed registry",
    ),
    (
        "image-lookalike-registry",
        ["tpu-rl:images.maxtext=us-docker.pkg.dev/cloud-tpu-images-mirror/maxtext-images/tpu_post_training:0.2.5"],
        "tpu-rl:images.maxtext",
        "not from an allowed registry",
    ),
    (
        "image-registry-removed",
        ['tpu-rl:images.registries=["us-docker.pkg.dev/cloud-tpu-images"]'],
        "tpu-rl:images.pathwaysServer",
        "not from an allowed registry",
    ),
    ("registries-malformed", ["tpu-rl:images.registries=[oops"], "tpu-rl:images.registries", "malformed JSON"),
    (
        "registries-too-many",
        ["tpu-rl:images.registries=[" + ", ".join(f'"r.io/r{i}"' for i in range(21)) + "]"],
        "tpu-rl:images.registries",
        "at most 20",
    ),
    ("registries-empty", ["tpu-rl:images.registries=[]"], "tpu-rl:images.registries", "non-empty list"),
    ("registries-text", ["tpu-rl:images.registries=docker.io"], "tpu-rl:images.registries", "a list of registry"),
    (
        "registries-bad-path",
        ['tpu-rl:images.registries=["https://docker.io/x"]'],
        "tpu-rl:images.registries[0]",
        "registry host and repository path",
    ),
    (
        "registries-host-only",
        ['tpu-rl:images.registries=["docker.io"]'],
        "tpu-rl:images.registries[0]",
        "registry host and repository path",
    ),
    (
        "registries-duplicate",
        ['tpu-rl:images.registries=["a.io/x", "a.io/x"]'],
        "tpu-rl:images.registries[1]",
        "duplicate of tpu-rl:images.registries[0]",
    ),
    # -- who the stack names as its own (the grammar of `make state-bucket`'s MEMBERS=)
    ("access-public-member", ['tpu-rl:access.members=["allUsers"]'], "tpu-rl:access.members[0]", "allUsers"),
    (
        "access-convenience-member",
        ['tpu-rl:access.readers=["projectViewer:acme-tpu"]'],
        "tpu-rl:access.readers[0]",
        "convenience member",
    ),
    (
        "access-member-duplicate",
        ['tpu-rl:access.members=["user:ops@acme.example", "user:OPS@acme.example"]'],
        "tpu-rl:access.members[1]",
        "duplicate of tpu-rl:access.members[0]",
    ),
    (
        "access-pool-location",
        ["tpu-rl:access.workloadIdentityPool=projects/123/locations/us-east5/workloadIdentityPools/github"],
        "tpu-rl:access.workloadIdentityPool",
        "locations/global",
    ),
    (
        "access-pool-project-id",
        ["tpu-rl:access.workloadIdentityPool=projects/acme-tpu/locations/global/workloadIdentityPools/github"],
        "tpu-rl:access.workloadIdentityPool",
        "the project's number",
    ),
    ("access-members-text", ["tpu-rl:access.members=user:ops@acme.example"], "tpu-rl:access.members", "a list"),
    ("exclusion-boolean", ["tpu-rl:gke.maintenanceExclusion=true"], "tpu-rl:gke.maintenanceExclusion", "NO_MINOR"),
    ("hold-format", ["tpu-rl:gke.holdUpgrades=2026-12-01"], "tpu-rl:gke.holdUpgrades", "START/END"),
    ("hold-not-a-date", ["tpu-rl:gke.holdUpgrades=2026-02-30/2026-03-10"], "tpu-rl:gke.holdUpgrades", "real dates"),
    ("hold-backwards", ["tpu-rl:gke.holdUpgrades=2026-12-10/2026-12-01"], "tpu-rl:gke.holdUpgrades", "after START"),
    ("hold-empty-span", ["tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-01"], "tpu-rl:gke.holdUpgrades", "after START"),
    ("hold-31-days", ["tpu-rl:gke.holdUpgrades=2026-12-01/2027-01-01"], "tpu-rl:gke.holdUpgrades", "30 days"),
    (
        "kms-key-format",
        ["tpu-rl:gke.secretsEncryptionKey=projects/p/keyRings/r/cryptoKeys/k"],
        "tpu-rl:gke.secretsEncryptionKey",
        "create, or a key",
    ),
    (
        "kms-key-elsewhere",
        ["tpu-rl:gke.secretsEncryptionKey=projects/my-project/locations/us-central1/keyRings/r/cryptoKeys/k"],
        "tpu-rl:gke.secretsEncryptionKey",
        "cluster's location us-east5",
    ),
    (
        "kms-key-global",
        ["tpu-rl:gke.secretsEncryptionKey=projects/my-project/locations/global/keyRings/r/cryptoKeys/k"],
        "tpu-rl:gke.secretsEncryptionKey",
        "create, or a key",
    ),
    ("versioning", ["tpu-rl:bucketVersioning=yes"], "tpu-rl:bucketVersioning", "true or false"),
    ("kueue-version", ["tpu-rl:kueue.version=0.16.0"], "tpu-rl:kueue.version", "expected one of 0.17.1"),
    ("reservation-format", ["tpu-rl:tpu.reservation=Bad Name"], "tpu-rl:tpu.reservation", "reservation name"),
    ("version-prefix", ["tpu-rl:gke.versionPrefix=latest"], "tpu-rl:gke.versionPrefix", "version prefix"),
    ("window-format", ["tpu-rl:gke.maintenanceWindow=25:00"], "tpu-rl:gke.maintenanceWindow", "HH:MM"),
    ("channel", ["tpu-rl:gke.releaseChannel=NIGHTLY"], "tpu-rl:gke.releaseChannel", "REGULAR"),
    ("chart-version", ["tpu-rl:workflow.jobsetVersion=v0.10.1"], "tpu-rl:workflow.jobsetVersion", "0.10.1"),
    # -- numbers: finite, ASCII digits, integers that are integers, inside the bounds
    ("int-float", ["tpu-rl:training.numBatches=1.5"], "tpu-rl:training.numBatches", "integer"),
    ("int-float-text", ["tpu-rl:training.numBatches=50.0"], "tpu-rl:training.numBatches", "integer"),
    ("int-bool", ["tpu-rl:training.numBatches=true"], "tpu-rl:training.numBatches", "integer"),
    ("int-underscore", ["tpu-rl:tpu.slices=1_0"], "tpu-rl:tpu.slices", "ASCII digits"),
    ("int-arabic-digit", ["tpu-rl:tpu.slices=\u0664"], "tpu-rl:tpu.slices", "ASCII digits"),
    ("int-huge", ["tpu-rl:training.numBatches=" + "1" + "0" * 30], "tpu-rl:training.numBatches", "ASCII digits"),
    ("int-above-max", ["tpu-rl:training.numBatches=100001"], "tpu-rl:training.numBatches", "at most 100000"),
    (
        "topk-huge",
        ["tpu-rl:training.decodeSamplingTopK=" + "1" + "0" * 20],
        "tpu-rl:training.decodeSamplingTopK",
        "ASCII digits",
    ),
    (
        "topk-above-vocab",
        ["tpu-rl:training.decodeSamplingTopK=262145"],
        "tpu-rl:training.decodeSamplingTopK",
        "at most 262144",
    ),
    ("int-list", ["tpu-rl:tpu.slices=[2]"], "tpu-rl:tpu.slices", "integer"),
    ("int-object", ['tpu-rl:tpu.slices={"n": 2}'], "tpu-rl:tpu.slices", "integer"),
    ("slices-zero", ["tpu-rl:tpu.slices=0"], "tpu-rl:tpu.slices", "at least 1"),
    ("slices-65", ["tpu-rl:tpu.slices=65"], "tpu-rl:tpu.slices", "at most 64"),
    ("float-nan", ["tpu-rl:training.learningRate=nan"], "tpu-rl:training.learningRate", "finite number"),
    ("float-inf", ["tpu-rl:training.learningRate=inf"], "tpu-rl:training.learningRate", "finite number"),
    ("float-minus-inf", ["tpu-rl:training.learningRate=-Infinity"], "tpu-rl:training.learningRate", "finite number"),
    ("float-overflow", ["tpu-rl:training.learningRate=1e400"], "tpu-rl:training.learningRate", "finite number"),
    ("float-word", ["tpu-rl:training.learningRate=fast"], "tpu-rl:training.learningRate", "finite number"),
    ("float-negative", ["tpu-rl:training.learningRate=-1e-5"], "tpu-rl:training.learningRate", "at least 0"),
    (
        "fraction-nan",
        ["tpu-rl:training.trainerDevicesFraction=nan"],
        "tpu-rl:training.trainerDevicesFraction",
        "finite number",
    ),
    ("hbm-above", ["tpu-rl:training.hbmUtilizationVllm=0.99"], "tpu-rl:training.hbmUtilizationVllm", "at most 0.95"),
    ("generations-one", ["tpu-rl:training.numGenerations=1"], "tpu-rl:training.numGenerations", "at least 2"),
    (
        "schedule-below",
        ["tpu-rl:training.learningRateScheduleSteps=-2"],
        "tpu-rl:training.learningRateScheduleSteps",
        "at least -1",
    ),
    ("fsdp-zero", ["tpu-rl:training.iciFsdpParallelism=0"], "tpu-rl:training.iciFsdpParallelism", "-1"),
    ("checkpoint-zero", ["tpu-rl:training.checkpointPeriod=0"], "tpu-rl:training.checkpointPeriod", "at least 1"),
    ("system-min-zero", ["tpu-rl:systemPool.minNodes=0"], "tpu-rl:systemPool.minNodes", "at least 1"),
    ("pool-max-1001", ["tpu-rl:cpuPool.maxNodes=1001"], "tpu-rl:cpuPool.maxNodes", "at most 1000"),
    ("cpu-disk-small", ["tpu-rl:cpuPool.diskSizeGb=10"], "tpu-rl:cpuPool.diskSizeGb", "at least 50"),
    ("restarts-unbounded", ["tpu-rl:workflow.maxRestarts=100"], "tpu-rl:workflow.maxRestarts", "at most 10"),
    ("bool-word", ["tpu-rl:protect=yes"], "tpu-rl:protect", "true or false"),
    ("bool-list", ["tpu-rl:protect=[]"], "tpu-rl:protect", "true or false, not a list"),
    ("bool-object", ["tpu-rl:forceDestroy={}"], "tpu-rl:forceDestroy", "true or false, not an object"),
    ("shared-project-word", ["tpu-rl:sharedProject=yes"], "tpu-rl:sharedProject", "true or false"),
    ("bool-one", ["tpu-rl:workflow.enabled=1"], "tpu-rl:workflow.enabled", "true or false"),
    # -- durations: Go-compatible, positive, bounded
    ("duration-zero", ["tpu-rl:workflow.timeouts.train=0s"], "tpu-rl:workflow.timeouts.train", "from 1m to 168h"),
    ("duration-arabic", ["tpu-rl:workflow.timeouts.train=\u0664h"], "tpu-rl:workflow.timeouts.train", "duration"),
    ("duration-huge", ["tpu-rl:workflow.timeouts.train=9999999999h"], "tpu-rl:workflow.timeouts.train", "duration"),
    ("duration-above", ["tpu-rl:workflow.timeouts.train=169h"], "tpu-rl:workflow.timeouts.train", "168h"),
    ("duration-days", ["tpu-rl:workflow.timeouts.convert=1d"], "tpu-rl:workflow.timeouts.convert", "duration"),
    ("duration-fraction", ["tpu-rl:workflow.timeouts.export=1.5h"], "tpu-rl:workflow.timeouts.export", "duration"),
    ("duration-negative", ["tpu-rl:workflow.timeouts.export=-1h"], "tpu-rl:workflow.timeouts.export", "duration"),
    ("duration-word", ["tpu-rl:workflow.timeouts.train=forever"], "tpu-rl:workflow.timeouts.train", "duration"),
    ("duration-list", ['tpu-rl:workflow.timeouts.train=["4h"]'], "tpu-rl:workflow.timeouts.train", "duration"),
    # -- authorized networks: canonical, unique, within GKE's limit
    ("networks-empty", ["tpu-rl:authorizedNetworks=[]"], "tpu-rl:authorizedNetworks", "non-empty"),
    ("networks-scalar", ["tpu-rl:authorizedNetworks=10.0.0.0/8"], "tpu-rl:authorizedNetworks", "list of CIDRs"),
    ("networks-bad-json", ["tpu-rl:authorizedNetworks=[10.0.0.0/8"], "tpu-rl:authorizedNetworks", "malformed"),
    ("cidr-no-prefix", ['tpu-rl:authorizedNetworks=["10.0.0.0"]'], "tpu-rl:authorizedNetworks[0]", "a.b.c.d/n"),
    ("cidr-netmask", ['tpu-rl:authorizedNetworks=["10.0.0.0/255.0.0.0"]'], "tpu-rl:authorizedNetworks[0]", "a.b.c.d/n"),
    (
        "cidr-leading-zero-prefix",
        ['tpu-rl:authorizedNetworks=["10.0.0.0/08"]'],
        "tpu-rl:authorizedNetworks[0]",
        "no leading zeros",
    ),
    (
        "cidr-leading-zero-octet",
        ['tpu-rl:authorizedNetworks=["010.0.0.0/8"]'],
        "tpu-rl:authorizedNetworks[0]",
        "no leading zeros",
    ),
    ("cidr-prefix-33", ['tpu-rl:authorizedNetworks=["10.0.0.0/33"]'], "tpu-rl:authorizedNetworks[0]", "prefix 0-32"),
    ("cidr-host-bits", ['tpu-rl:authorizedNetworks=["10.0.0.1/8"]'], "tpu-rl:authorizedNetworks[0]", "host bits"),
    ("cidr-ipv6", ['tpu-rl:authorizedNetworks=["2001:db8::/32"]'], "tpu-rl:authorizedNetworks[0]", "IPv4"),
    ("cidr-garbage", ['tpu-rl:authorizedNetworks=["office"]'], "tpu-rl:authorizedNetworks[0]", "CIDR"),
    ("cidr-null", ["tpu-rl:authorizedNetworks=[null]"], "tpu-rl:authorizedNetworks[0] = null", "CIDR"),
    (
        "cidr-duplicate",
        ['tpu-rl:authorizedNetworks=["10.0.0.0/8", "10.0.0.0/8"]'],
        "tpu-rl:authorizedNetworks[1]",
        "duplicate of tpu-rl:authorizedNetworks[0]",
    ),
    (
        "cidr-too-many",
        ["tpu-rl:authorizedNetworks=" + json.dumps([f"10.0.{i}.0/24" for i in range(51)])],
        "tpu-rl:authorizedNetworks",
        "at most 50",
    ),
    # -- an existing cluster
    (
        "existing-context-shell",
        ["tpu-rl:existingCluster.kubeContext=gke_p_r_c;rm -rf"],
        "tpu-rl:existingCluster.kubeContext",
        "a kubeconfig context's name",
    ),
    (
        "existing-identity-alone",
        ["tpu-rl:existingCluster.workloadIdentity=false"],
        "tpu-rl:existingCluster.workloadIdentity",
        "only with tpu-rl:existingCluster.kubeContext",
    ),
    (
        "existing-with-created-only-keys",
        [
            "tpu-rl:existingCluster.kubeContext=kind-tpu-rl",
            "tpu-rl:gke.secretsEncryptionKey=create",
            "tpu-rl:images.mirror=true",
        ],
        "tpu-rl:gke.secretsEncryptionKey",
        "only for a cluster the stack creates",
    ),
    # -- structure
    ("unknown-key", ["tpu-rl:clustername=x"], "tpu-rl:clustername", "did you mean tpu-rl:clusterName"),
    (
        "unknown-key-full-width",
        ["tpu-rl:training=", "tpu-rl:trainｉng.numBatches=10"],
        "tpu-rl:trainｉng",
        "did you mean tpu-rl:training? ('ｉ' not ASCII)",
    ),
    ("tpu-unknown-field", ["tpu-rl:tpu.topolgy=4x4"], "tpu-rl:tpu.topolgy", "did you mean topology"),
    ("nested-unknown-field", ["tpu-rl:workflow.timeouts.trian=4h"], "tpu-rl:workflow.timeouts.trian", "train"),
    ("object-bad-json", ["tpu-rl:workflow={bad"], "tpu-rl:workflow", "malformed JSON"),
    ("object-is-list", ["tpu-rl:workflow=[1]"], "tpu-rl:workflow", "expected an object"),
    ("object-is-number", ["tpu-rl:tpu=5"], "tpu-rl:tpu", "expected an object"),
    ("nested-object-is-scalar", ["tpu-rl:workflow.timeouts=5"], "tpu-rl:workflow.timeouts", "expected an object"),
    ("extra-args-list", [f"{X}=[1]"], X, "MaxText key: value pairs"),
    # -- TPU shape and capacity
    ("tpu-version", ["tpu-rl:tpu.version=v4"], "tpu-rl:tpu.version", "v6e"),
    (
        "tpu-machine-of-other-version",
        ["tpu-rl:tpu.machineType=ct5lp-hightpu-4t"],
        "tpu-rl:tpu.machineType",
        "ct6e-standard-4t",
    ),
    ("tpu-topology-unformable", ["tpu-rl:tpu.topology=4x5"], "tpu-rl:tpu.topology", "2x4, 4x4, 4x8"),
    ("tpu-topology-single-host", ["tpu-rl:tpu.topology=2x2"], "tpu-rl:tpu.topology", "single-host"),
    (
        "tpu-topology-on-single-host-machine",
        ["tpu-rl:tpu.machineType=ct6e-standard-8t", "tpu-rl:tpu.topology=4x8"],
        "tpu-rl:tpu.topology",
        "single-host",
    ),
    ("tpu-capacity", ["tpu-rl:tpu.capacity=preemptible"], "tpu-rl:tpu.capacity", "flex-start"),
    ("tpu-reservation-missing", ["tpu-rl:tpu.capacity=reservation"], "tpu-rl:tpu.reservation", "required"),
    ("tpu-reservation-with-spot", ["tpu-rl:tpu.reservation=res-1"], "tpu-rl:tpu.reservation", "only allowed"),
    ("flex-start-zone", ["tpu-rl:tpu.capacity=flex-start", "gcp:zone=us-east5-c"], "gcp:zone", "flex-start"),
    ("machine-family", ["tpu-rl:cpuPool.machineType=z9-standard-64"], "tpu-rl:cpuPool.machineType", "machine family"),
    # -- cross-field rules
    (
        "system-max-below-min",
        ["tpu-rl:systemPool.minNodes=3", "tpu-rl:systemPool.maxNodes=2"],
        "tpu-rl:systemPool.maxNodes",
        "minNodes",
    ),
    (
        "cpu-machine-too-small",
        ["tpu-rl:cpuPool.machineType=n2-standard-16"],
        "tpu-rl:cpuPool.machineType",
        "Pathways head",
    ),
    (
        "micro-batch-not-divisor",
        ["tpu-rl:training.batchSize=4", "tpu-rl:training.trainMicroBatchSize=3"],
        "tpu-rl:training.trainMicroBatchSize",
        "divide",
    ),
    (
        "prefill-equals-target",
        ["tpu-rl:training.maxPrefillPredictLength=640"],
        "tpu-rl:training.maxPrefillPredictLength",
        "below maxTargetLength",
    ),
    (
        "fractions-over-one",
        ["tpu-rl:training.samplerDevicesFraction=0.75"],
        "tpu-rl:training.samplerDevicesFraction",
        "at most 1",
    ),
    (
        "trainer-fraction-zero",
        ["tpu-rl:training.trainerDevicesFraction=0"],
        "tpu-rl:training.trainerDevicesFraction",
        "above 0",
    ),
    (
        "rollout-does-not-divide",
        ["tpu-rl:training.rolloutTensorParallelism=3"],
        "tpu-rl:training.rolloutTensorParallelism",
        "sampler",
    ),
    (
        "ici-mesh-does-not-tile",
        ["tpu-rl:training.iciExpertParallelism=3"],
        "tpu-rl:training.iciExpertParallelism",
        "trainer",
    ),
    (
        "actor-copy-on-shared-chips",
        ["tpu-rl:training.loadCheckpointOnlyOnce=true", "tpu-rl:training.extraArgs.use_pathways=false"],
        "tpu-rl:training.loadCheckpointOnlyOnce",
        "share their chips",
    ),
    (
        "no-chip-per-vm",
        ["tpu-rl:training.extraArgs.chips_per_vm=0", "tpu-rl:training.loadCheckpointOnlyOnce=false"],
        "tpu-rl:training.extraArgs.chips_per_vm",
        "at least 1",
    ),
    # -- two slices: one sampler replica over the samplers' slice (core/config/finish.py _check_disaggregated)
    (
        "two-slices-sampler-replicas",
        ["tpu-rl:tpu.slices=2", "tpu-rl:training.rolloutTensorParallelism=4"],
        "tpu-rl:training.rolloutTensorParallelism",
        "maxtext#2702",
    ),
    ("three-slices", ["tpu-rl:tpu.slices=3"], "tpu-rl:tpu.slices", "one slice each"),
    # -- a training attempt fits its deadline (core/config/workflow_rules.py check_train_deadline): dev's 6h
    ("train-past-its-deadline", ["tpu-rl:training.numBatches=200"], "tpu-rl:workflow.timeouts.train", "6.1 h"),
    (
        "train-past-every-deadline",
        ["tpu-rl:training.numBatches=7000", "tpu-rl:workflow.timeouts.train=168h"],
        "tpu-rl:workflow.timeouts.train",
        "lower tpu-rl:training.numBatches (a deadline is at most 168h)",
    ),
    (
        "train-past-its-deadline-and-another-problem",
        ["tpu-rl:training.numBatches=200", "tpu-rl:kueue.podsReadyTimeout=1s"],
        "tpu-rl:workflow.timeouts.train",
        "tpu-rl:kueue.podsReadyTimeout",
    ),
    # -- restarts for the run's length (core/config/workflow_rules.py restarts_for_run)
    (
        "restarts-short-of-the-run",
        ["tpu-rl:training.numBatches=3000", "tpu-rl:workflow.maxRestarts=1", "tpu-rl:workflow.timeouts.train=96h"],
        "tpu-rl:workflow.maxRestarts",
        "one per started 24 h",
    ),
    # -- what the stack relies on of GKE and of its MaxText image
    ("gke-older-than-kueue", ["tpu-rl:gke.versionPrefix=1.32."], "tpu-rl:gke.versionPrefix", "Kubernetes 1.33 to 1.35"),
    (
        "maxtext-image-of-another-release",
        ["tpu-rl:images.maxtext=us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:maxtext-v0.2.4"],
        "tpu-rl:images.maxtext",
        "names MaxText 0.2.4",
    ),
    ("maxtext-check-unknown", ["tpu-rl:images.maxtextCheck=ignore"], "tpu-rl:images.maxtextCheck", "refuse"),
    # -- combinations that cannot finish (docs/configuration.md "Combinations refused because they cannot finish")
    ("training-no-step", [f"{X}.train_fraction=0.05"], f"{X}.train_fraction", "= 0 steps"),
    (
        "evaluate-more-tokens-than-it-generates",
        [EVALUATE, "tpu-rl:training.maxTargetLength=8192"],
        "tpu-rl:training.maxTargetLength",
        "at most 4096",
    ),
    (
        "evaluate-marker-too-long",
        [EVALUATE, f"{X}.solution_end_token=" + "e" * 101],
        f"{X}.solution_end_token",
        "at most 100 characters",
    ),
    (
        "evaluate-same-markers",
        [EVALUATE, f"{X}.solution_start_token=ANSWER", f"{X}.solution_end_token=ANSWER"],
        f"{X}.solution_start_token",
        "use different start and end markers",
    ),
    ("optimizer-unknown", ["tpu-rl:training.optimizer=sgd"], "tpu-rl:training.optimizer", "adafactor"),
    ("model-unknown", ["tpu-rl:model.name=llama3-8b"], "tpu-rl:model.name", "gemma4-26b"),
    # -- extraArgs against MaxText 0.2.5's own keys and types
    ("extra-typo-rl", [f"{X}.rl.num_generation=8"], f"{X}.rl.num_generation", "did you mean rl.num_generations"),
    ("extra-unknown", [f"{X}.eval_intervall=5"], f"{X}.eval_intervall", "did you mean eval_interval"),
    ("extra-quoted-path-typo", [f'{X}["rl.num_iteration"]=2'], f"{X}.rl.num_iteration", "rl.num_iterations"),
    ("extra-int-word", [f"{X}.rl.num_iterations=abc"], f"{X}.rl.num_iterations", "integer"),
    ("extra-int-negative", [f"{X}.rl.num_iterations=-1"], f"{X}.rl.num_iterations", "at least 1"),
    ("extra-iterations-resume", [f"{X}.rl.num_iterations=2"], f"{X}.rl.num_iterations", "google/tunix#2290"),
    (
        "extra-iterations-without-restarts",
        [f"{X}.rl.num_iterations=2", "tpu-rl:workflow.maxRestarts=0", "tpu-rl:kueue.enabled=false"],
        f"{X}.rl.num_iterations",
        "the next `up` retrying the run",
    ),
    ("extra-rollout-replicas", [f"{X}.rollout_data_parallelism=2"], f"{X}.rollout_data_parallelism", "one sampler"),
    ("extra-fraction-word", [f"{X}.train_fraction=x"], f"{X}.train_fraction", "finite number"),
    ("extra-fraction-nan", [f"{X}.train_fraction=nan"], f"{X}.train_fraction", "finite number"),
    ("extra-fraction-inf", [f"{X}.train_fraction=inf"], f"{X}.train_fraction", "finite number"),
    ("extra-fraction-zero", [f"{X}.train_fraction=0"], f"{X}.train_fraction", "above 0"),
    ("extra-epoch-float", [f"{X}.num_epoch=1.5"], f"{X}.num_epoch", "integer"),
    ("extra-bool-number", [f"{X}.async_checkpointing=5"], f"{X}.async_checkpointing", "true or false"),
    ("extra-int-shell", [f"{X}.eval_interval=1;rm"], f"{X}.eval_interval", "integer"),
    ("extra-text-shell", [f"{X}.profiler=$(rm -rf x)"], f"{X}.profiler", "letters, digits"),
    ("extra-list-key", [f'{X}.logical_axis_rules=[["a"]]'], f"{X}.logical_axis_rules", "list"),
    ("extra-program-key", [f"{X}.hf_access_token=x"], f"{X}.hf_access_token", "not settable in extraArgs"),
    ("extra-no-checkpoints", [f"{X}.enable_checkpointing=false"], f"{X}.enable_checkpointing", "nothing to export"),
    ("extra-checkpoint-dir", [f"{X}.checkpoint_dir=gs://b/x/"], f"{X}.checkpoint_dir", "derives it"),
    ("extra-tensorboard-dir", [f"{X}.tensorboard_dir=gs://b/x/"], f"{X}.tensorboard_dir", "derives it"),
    ("extra-run-name", [f"{X}.run_name=other"], f"{X}.run_name", "another name starts over"),
    ("extra-output", [f"{X}.base_output_directory=gs://b/x/"], f"{X}.base_output_directory", "content-addressed"),
    ("extra-load-path", [f"{X}.load_parameters_path=gs://b/x/"], f"{X}.load_parameters_path", "conversion's"),
    ("extra-ocdbt", [f"{X}.checkpoint_storage_use_ocdbt=true"], f"{X}.checkpoint_storage_use_ocdbt", "conversion"),
    ("extra-typed-knob", [f"{X}.learning_rate=1e-4"], f"{X}.learning_rate", "typed field tpu-rl:training.learningRate"),
    ("extra-key-shape", [f"{X}.Eval-Interval=5"], f"{X}.Eval-Interval", "snake_case"),
    ("extra-empty-value", [f"{X}.eval_interval="], f"{X}.eval_interval", "expected a value"),
    # -- secrets: only tpu-rl:hfToken may hold one, and no message shows it
    ("token-in-extra-args", [f"{X}.hf_token={TOKEN_LIKE}"], f"{X}.hf_token", "looks like a Hugging Face token"),
    ("token-in-cluster-name", [f"tpu-rl:clusterName={TOKEN_LIKE}"], "tpu-rl:clusterName", "looks like"),
    (
        "token-in-networks",
        [f'tpu-rl:authorizedNetworks=["{TOKEN_LIKE}"]'],
        "tpu-rl:authorizedNetworks[0]",
        "looks like",
    ),
    ("token-in-revision", [f"tpu-rl:model.revision={TOKEN_LIKE}"], "tpu-rl:model.revision", "looks like"),
    ("token-in-unknown-key", [f"tpu-rl:token={TOKEN_LIKE}"], "tpu-rl:token", "looks like"),
    # -- --set syntax (pulumi config set --path)
    ("set-without-value", ["tpu-rl:protect"], "--set tpu-rl:protect", "KEY=VALUE"),
    ("set-bad-index", ["tpu-rl:authorizedNetworks[x]=10.0.0.0/8"], "--set tpu-rl:authorizedNetworks[x]", "index"),
    (
        "set-index-past-end",
        ["tpu-rl:authorizedNetworks[3]=10.0.0.0/8"],
        "--set tpu-rl:authorizedNetworks[3]",
        "past the end",
    ),
    ("set-unclosed-quote", ['tpu-rl:training["extraArgs=1'], '--set tpu-rl:training["extraArgs', "quote"),
    ("set-no-namespace", ["clusterName=x"], "--set clusterName", "NAMESPACE:KEY"),
    ("set-index-into-object", ["tpu-rl:tpu[0]=x"], "tpu-rl:tpu", "expected an object"),
]


def _run(argv: list[str], tmp_path, capsys) -> tuple[int, str, str, float]:
    out = tmp_path / "plan"
    start = time.monotonic()
    code = plan_main([*argv, "--out", str(out)])
    elapsed = time.monotonic() - start
    captured = capsys.readouterr()
    assert not out.exists(), "nothing may be written on a bad input"
    return code, captured.out, captured.err, elapsed


READ_YAML = stack_files.read_yaml


@functools.lru_cache(maxsize=4)
def _parsed(path: Path) -> Any:
    """Pulumi.yaml and the dev stack file, parsed once per test process (parsing them is most of a case's time)."""
    return READ_YAML(path)


def loader_message(overrides: list[str]) -> str:
    """What the config loader (the program's first call) says about a bad input: the stack file and its overrides
    read as the offline plan reads them (the parsed files cached, each case given its own copy); each case's once
    per process (and mutant): the corpus test reads them all again."""
    return _loader_message(tuple(overrides))


@per_mutant_cache
def _loader_message(overrides: tuple[str, ...]) -> str:
    with (
        mock.patch.object(stack_files, "read_yaml", lambda path: copy.deepcopy(_parsed(Path(path)))),
        pytest.raises((ConfigError, stack_files.StackFileError)) as caught,
    ):
        config, secret_keys, _ = stack_files.load_stack_config(stack_files.ROOT / "Pulumi.dev.yaml", list(overrides))
        config["tpu-rl:hfToken"] = "hf_x"
        load_settings(config, "dev", frozenset(secret_keys | {"tpu-rl:hfToken"}))
    return str(caught.value)


@pytest.mark.pure
@pytest.mark.parametrize(("case", "overrides", "key", "words"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_value_is_refused_by_the_config_loader(case, overrides, key, words):
    """The corpus through the loader alone (fast for mutation runs); each message is reviewed word for
    word in tests/data/config-messages.tsv (`TPU_RL_UPDATE_MESSAGES=1 make test` rewrites it)."""
    message = loader_message(overrides)
    assert key in message and words in message and TOKEN_LIKE not in message, message
    lines = message.split("\n")
    assert all(lines) and len(set(lines)) == len(lines), "one line per problem, each once"
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        return
    assert message == read_messages()[case]


@pytest.mark.pure
def test_the_reviewed_messages_are_the_corpus():
    """Regenerates the reviewed file when asked; otherwise it lists exactly the corpus, in order, then the refused side
    of each boundary (tests/config_boundaries.py), then tests/test_config_many_errors.py's fixture."""
    messages = {case: loader_message(overrides) for case, overrides, _, _ in BAD_INPUTS}
    messages |= {f"boundary:{rule}": boundary_message(refused) for rule, _, _, _, refused in BOUNDARIES}
    messages["many-errors"] = many_errors_message()
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        rows = ["\t".join((case, *message.split("\n"))) for case, message in messages.items()]
        MESSAGES.write_text("".join(f"{row}\n" for row in rows))
    assert list(read_messages()) == list(messages)


@pytest.mark.parametrize(("overrides", "key", "words"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
@pytest.mark.slow
def test_bad_value_exits_2_naming_the_key(overrides, key, words, tmp_path, capsys):
    argv = ["--stack", "dev"]
    for override in overrides:
        argv += ["--set", override]
    code, out, err, elapsed = _run(argv, tmp_path, capsys)
    message = err.strip()
    assert code == 2, err
    assert "Traceback" not in message, message
    assert all(line.startswith("error: ") for line in message.splitlines()), "one line per problem"
    assert key in message, message
    assert words in message, message
    assert TOKEN_LIKE not in message, "a token-shaped value is never echoed"
    assert out == ""
    assert elapsed < 5


# Stack files a person might write: (id, file text, key or file part the message names, words)
BAD_FILES = [
    ("file-not-yaml", "config: [unclosed\n", "Pulumi.bad.yaml", "not valid YAML (line"),
    ("file-not-mapping", "- a\n- b\n", "Pulumi.bad.yaml", "expected a mapping"),
    ("file-config-list", "config:\n  - a\n", "Pulumi.bad.yaml", "`config:` must be a mapping"),
    ("file-key-without-namespace", "config:\n  clusterName: x\n", "Pulumi.bad.yaml", "NAMESPACE:KEY"),
    (
        "file-alias-bomb",
        "config:\n  a: &a [1, 1]\n  b: &b [*a, *a]\n  c: [*b, *b]\n",
        "Pulumi.bad.yaml",
        "YAML aliases",
    ),
    (
        "file-null-scalar",
        "config:\n  gcp:project: my-proj-123\n  gcp:region: us-east5\n  gcp:zone:\n",
        "gcp:zone = null",
        "required",
    ),
    (
        "file-secure-training",
        "config:\n  gcp:project: my-proj-123\n  gcp:region: us-east5\n  gcp:zone: us-east5-b\n"
        "  tpu-rl:training:\n    secure: v1:abcdef\n",
        "tpu-rl:training is stored as a secret",
        "only tpu-rl:hfToken",
    ),
    (
        "file-plain-token",
        "config:\n  gcp:project: my-proj-123\n  gcp:region: us-east5\n  gcp:zone: us-east5-b\n"
        f"  tpu-rl:hfToken: {TOKEN_LIKE}\n",
        "tpu-rl:hfToken is stored in plain text",
        "not shown",
    ),
    (
        "file-object-null-field",
        "config:\n  gcp:project: my-proj-123\n  gcp:region: us-east5\n  gcp:zone: us-east5-b\n"
        "  tpu-rl:tpu:\n    capacity: reservation\n    reservation:\n",
        "tpu-rl:tpu.reservation = null",
        "required",
    ),
    (
        "file-float-slices",
        "config:\n  gcp:project: my-proj-123\n  gcp:region: us-east5\n  gcp:zone: us-east5-b\n"
        "  tpu-rl:tpu:\n    slices: 2.0\n    capacity: spot\n",
        "tpu-rl:tpu.slices = 2.0",
        "integer",
    ),
    (
        "file-bool-as-int",
        "config:\n  gcp:project: my-proj-123\n  gcp:region: us-east5\n  gcp:zone: us-east5-b\n"
        "  tpu-rl:tpu:\n    slices: true\n    capacity: spot\n",
        "tpu-rl:tpu.slices = true",
        "integer",
    ),
]


@pytest.mark.parametrize(("text", "key", "words"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_bad_stack_file_exits_2_with_one_line(text, key, words, tmp_path, capsys):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text)
    code, out, err, elapsed = _run(["--config-file", str(path)], tmp_path, capsys)
    lines = err.strip().splitlines()
    message = next((line for line in lines if key in line), "")
    assert code == 2, err
    assert "Traceback" not in err and all(line.startswith("error: ") for line in lines), err
    assert key in message and words in message, err
    assert TOKEN_LIKE not in err and out == "" and elapsed < 5


@pytest.mark.pure
@pytest.mark.parametrize(
    "typed",
    ["tpu-rl:trainｉng", "tpu-rl:ｔｒａｉｎｉｎｇ", "tpu-rl:trainng"],
    ids=["one-full-width", "all-full-width", "ascii"],
)
def test_a_mistyped_key_is_one_line_not_also_the_rules_that_its_default_breaks(typed, tmp_path):
    """The stack file's training block under a key with a full-width letter: the CLI hands the program Pulumi.yaml's
    default for tpu-rl:training (tools.stack_files.load_stack_config applies it as the CLI does), the tutorial's mesh,
    which a 2x4 slice cannot tile. One problem, the mistyped key, is one line."""
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text((stack_files.ROOT / "Pulumi.dev.yaml").read_text().replace("  tpu-rl:training:\n", f"  {typed}:\n"))
    config, secret_keys, _ = stack_files.load_stack_config(path)
    with pytest.raises(ConfigError) as caught:
        load_settings({**config, "tpu-rl:hfToken": "hf_x"}, "dev", frozenset(secret_keys | {"tpu-rl:hfToken"}))
    (line,) = str(caught.value).splitlines()
    assert line.startswith(f'{typed} = "(set)" is invalid: unknown key; did you mean tpu-rl:training? '), line


def test_stack_file_limits(tmp_path, capsys):
    big = tmp_path / "Pulumi.big.yaml"
    big.write_text("config:\n  tpu-rl:clusterName: x\n" + "#" * 1_100_000)
    code, _, err, _ = _run(["--config-file", str(big)], tmp_path, capsys)
    assert code == 2 and "larger than 1000000 bytes" in err
    binary = tmp_path / "Pulumi.bin.yaml"
    binary.write_bytes(b"config:\n  a: \xff\xfe\n")
    code, _, err, _ = _run(["--config-file", str(binary)], tmp_path, capsys)
    assert code == 2 and "not UTF-8" in err
    code, _, err, _ = _run(["--config-file", str(tmp_path / "missing.yaml")], tmp_path, capsys)
    assert code == 2 and "cannot read" in err
    code, _, err, _ = _run(["--config-file", str(tmp_path)], tmp_path, capsys)
    assert code == 2 and "cannot read" in err


def test_a_bad_hub_endpoint_in_the_environment_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "not a url")
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)  # the offline plan checks a token from the environment
    code, _, err, _ = _run(["--stack", "dev", "--preflight", "--set", "gcp:project=real-project-1"], tmp_path, capsys)
    assert code == 2 and err.strip() == (
        'error: preflight: HF_ENDPOINT = "not a url" is invalid: expected an http(s) URL of a Hub'
    )


def test_the_corpus_is_large_and_distinct():
    ids = [c[0] for c in BAD_INPUTS] + [c[0] for c in BAD_FILES]
    assert len(ids) == len(set(ids)) and len(ids) >= 80


@pytest.mark.slow
def test_readme_commands_work_as_written(tmp_path, capsys):
    """`--set` takes the `pulumi config set --path` syntax docs/configuration.md shows, list indexes included."""
    out = tmp_path / "ok"
    code = plan_main(
        [
            "--out",
            str(out),
            "--stack",
            "prod",
            "--set",
            "tpu-rl:authorizedNetworks[0]=198.51.100.7/32",
            "--set",
            "tpu-rl:authorizedNetworks[1]=192.0.2.0/24",
            "--set",
            'tpu-rl:training.extraArgs["rl.grpo_beta"]=0.04',
            "--set",
            "tpu-rl:workflow.maxRestarts=0",
            "--set",
            "tpu-rl:training.extraArgs.num_epoch=2",
            "--set",
            "tpu-rl:training.extraArgs.eval_interval=5",
            "--set",
            "tpu-rl:workflow.timeouts.train=30h",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert (out / "plan.json").exists()
    plan = plan_of(
        "prod",
        "tpu-rl:authorizedNetworks[0]=198.51.100.7/32",
        "tpu-rl:authorizedNetworks[1]=192.0.2.0/24",
        'tpu-rl:training.extraArgs["rl.grpo_beta"]=0.04',
        "tpu-rl:training.extraArgs.num_epoch=2",
        "tpu-rl:workflow.maxRestarts=0",
    )
    cluster = one(plan, "gcp:container/cluster:Cluster")["inputs"]
    blocks = [b["cidrBlock"] for b in cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"]]
    assert blocks == ["198.51.100.7/32", "192.0.2.0/24"]
    assert plan.outputs["steps"]["train"]["finalStep"] == 100, "num_epoch=2 doubles the steps"
    nested = settings("prod", ['tpu-rl:training.extraArgs["rl.grpo_beta"]=0.04'])
    assert nested.training.extra_args["rl.grpo_beta"] == "0.04", "the quoted path names the dotted key"


BASE = {"gcp:project": "my-proj-123", "gcp:region": "us-east5", "gcp:zone": "us-east5-b"}
TOKEN = {"tpu-rl:hfToken": "hf_x"}


def test_token_required_while_workflow_enabled():
    with pytest.raises(ConfigError, match="tpu-rl:hfToken .*required while tpu-rl:workflow.enabled"):
        load_settings({**BASE, "tpu-rl:tpu": '{"reservation": "r"}'}, "t")


def test_plaintext_token_is_rejected():
    with pytest.raises(ConfigError, match="plain text"):
        load_settings({**BASE, **TOKEN, "tpu-rl:tpu": '{"reservation": "r"}'}, "t", frozenset())


def test_provision_only_needs_no_token():
    settings = load_settings(
        {**BASE, "tpu-rl:tpu": '{"reservation": "r"}', "tpu-rl:workflow": '{"enabled": false}'}, "t"
    )
    assert not settings.workflow.enabled and not settings.hf_token_set


def test_defaults_reproduce_the_tutorial():
    s = load_settings({**BASE, **TOKEN, "tpu-rl:tpu": '{"reservation": "r"}'}, "t", frozenset(TOKEN))
    assert (s.tpu.version, s.tpu.machine_type, s.tpu.topology, s.tpu.slices, s.tpu.capacity) == (
        "v6e",
        "ct6e-standard-4t",
        "4x8",
        1,
        "reservation",
    )
    assert s.tpu.reservation == "projects/my-proj-123/reservations/r"
    assert (s.system_pool.machine_type, s.system_pool.min_nodes, s.system_pool.max_nodes) == ("e2-standard-8", 2, 10)
    assert s.cpu_pool.machine_type == "n4-standard-64" and s.cpu_pool.min_nodes == 0  # Cluster Toolkit's cpu-np
    assert s.authorized_networks == ("0.0.0.0/0",)
    assert s.model.spec.hf_repo == "google/gemma-4-26b-a4b-it" and s.model.spec.maxtext_name == "gemma4-26b"
    assert s.images.maxtext.endswith("tpu_post_training:0.2.5")
    assert s.training.knobs["num_batches"] == 50 and s.training.knobs["learning_rate"] == 2e-5
    assert s.training.optimizer == "adafactor"
    assert s.workflow.max_restarts == 1, "departs from the tutorial's 0: a reserved slice survives one disruption"
    assert s.bucket_name == "my-proj-123-tpu-rl"


def test_shared_reservation_path_is_kept():
    s = load_settings(
        {**BASE, **TOKEN, "tpu-rl:tpu": '{"reservation": "projects/other-proj/reservations/r"}'}, "t", frozenset(TOKEN)
    )
    assert s.tpu.reservation == "projects/other-proj/reservations/r"
