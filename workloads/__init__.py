"""Workflow layer of tpu-rl: the convert, train and export steps."""
