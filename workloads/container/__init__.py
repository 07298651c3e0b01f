"""The programs that run inside the step containers (files of each step's ConfigMap, ``workloads.specs.commands``):
the image's MaxText checked against the adopted wheel's RECORD, the base model's snapshot, the newest checkpoint,
the export's completion, the evaluation, the Hub upload, and the training's stall watchdog and exit verdict. Each is a
file that needs only the image's packages, the standard library and the files it imports beside it in its ConfigMap
(``shown.py``; ``tpu_rl_program.py``, how a run ends; ``tpu_rl_watch.py``, training's process helpers;
``tpu_rl_download.py``, a capped download; core's ``errors.py``, ``hf_model.py`` and
redaction by their names: ``workloads.specs.commands.program_imports``; the RECORD pin is inlined into the MaxText
check); the operator's readers are ``workloads.observe``'s, and may import from here, never the other way round."""
