"""Create the step's output folder once every grant of the step's account is in effect (run in the MaxText image by
each step's script as ``python3 /tpu-rl/mark_folder.py``, a file of the step's ConfigMap beside ``shown.py``, which it
imports; the image's google-cloud-storage).

    python3 mark_folder.py OUTPUT_URI [READ_URI ...]

A new grant takes "typically 2 minutes, potentially 7 minutes or longer" to apply
(https://cloud.google.com/iam/docs/access-change-propagation), and so does the Workload Identity binding that lets
the pod act as its account. Each grant is used once here, retried while it is refused, until every one answers or
BOUND_SECONDS have passed: the bucket's metadata (legacyBucketReader), an object that is not there under each prefix
the step reads (404: the read grant is in effect; 403: not yet), then the output folder (the write grant).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from workloads.container import shown
else:  # python3 /tpu-rl/mark_folder.py: shown.py is a file of the same ConfigMap, its folder on sys.path
    import shown

BOUND_SECONDS = 480.0
"""IAM's "potentially 7 minutes" (420 s) and a margin."""
PAUSE_SECONDS = 10.0
PROBE = ".tpu-rl-grant-probe"


def split(uri):
    bucket, _, name = uri[len("gs://") :].partition("/")
    return bucket, name


def not_yet(err):
    """A grant not in effect yet: GCS's 403, or the pod's token for its account refused (Workload Identity; the
    metadata server not answering yet, in a pod's first seconds, is retried alike)."""
    from google.api_core import exceptions
    from google.auth import exceptions as auth

    waits = (exceptions.Forbidden, auth.RefreshError, auth.TransportError, auth.DefaultCredentialsError)
    return isinstance(err, waits)


def uses(client, output, reads):
    """(what, its use) for each grant: the bucket's metadata, a read under each read prefix, the folder's creation."""
    from google.api_core import exceptions

    bucket, name = split(output)

    def read(uri):
        where, prefix = split(uri)
        with contextlib.suppress(exceptions.NotFound):
            client.bucket(where).blob(prefix.rstrip("/") + "/" + PROBE).reload()

    def create():
        client.bucket(bucket).blob(name).upload_from_string(b"", content_type="application/x-directory")

    def metadata():
        client.get_bucket(bucket)

    return [(f"gs://{bucket}", metadata), *((uri, functools.partial(read, uri)) for uri in reads), (output, create)]


def main(argv, clock=time.monotonic, pause=time.sleep):
    from google.cloud import storage

    output, reads = argv[0], list(dict.fromkeys(argv[1:]))  # a prefix named twice is used once
    ends = clock() + BOUND_SECONDS
    pending, waited = None, False
    while True:
        try:
            pending = uses(storage.Client(), output, reads) if pending is None else pending
            while pending:
                pending[0][1]()
                pending.pop(0)
            print(f"tpu-rl: created {output}")
            return 0
        except Exception as err:
            what = pending[0][0] if pending else output
            said = f"{type(err).__name__}: {shown.line(err, 200)}"
            if not not_yet(err):
                return f"tpu-rl: cannot create {output} ({type(err).__name__}): check the step's bucket access"
            if clock() >= ends:
                return (
                    f"tpu-rl: {what} still refused after {BOUND_SECONDS:g} s ({said}): the step account's grants have "
                    "not taken effect; run `make up STACK=<stack>` again"
                )
            if not waited:
                print(f"tpu-rl: waiting up to {BOUND_SECONDS:g} s for the step account's grants ({what}: {said})")
                waited = True
            pause(min(PAUSE_SECONDS, max(0.0, ends - clock())))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
