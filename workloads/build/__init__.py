"""Pure builders of the steps: argv and container scripts (``commands``), JobSet manifests
(``manifests``) and the content-addressed steps themselves (``steps``). No Pulumi, no network."""
