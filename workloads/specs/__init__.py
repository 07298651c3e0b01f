"""Pure builders of the steps, each step's specification as plain data: argv and container scripts
(``commands``), the JobSet and ConfigMap manifests (``step_manifests``), the values derived from the config
(``derived``), the model card (``model_card``), where a step's logs are read (``step_logs``) and the
content-addressed steps themselves (``step_specs``). No Pulumi, no network."""
