"""tpu-rl: GRPO post-training of Gemma 4 on a GKE TPU slice, as one Pulumi program."""

from program import live_world, main

main(live_world())
