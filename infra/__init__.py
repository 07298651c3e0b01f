"""Platform layer of tpu-rl: typed config, TPU catalogue, GCP and Kubernetes platform."""
