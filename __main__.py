"""tpu-rl: GRPO post-training of Gemma 4 on a GKE TPU slice, as one Pulumi program."""

from program import main

main()
