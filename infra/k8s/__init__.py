"""Kubernetes: pure manifests, kubeconfig and the bounded live reader, plus the platform component."""
