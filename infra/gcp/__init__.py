"""GCP resources: pure specs (gke_spec, naming) and the components that register them."""
