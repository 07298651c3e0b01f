"""The loopback Hub (``tests.fake_hub.FakeHub``) serving a dataset repository: ``/api/datasets/...`` and
``/datasets/<repo>/resolve/...``, as ``huggingface_hub`` asks for a dataset's info and files, counted in
``FakeHub.sent`` like a model's."""

from __future__ import annotations

from tests.fake_hub import NOT_ACCEPTED, REPO, FakeHub

DATASET = "nvidia/OpenMathInstruct-2"
DATASET_FILES = {
    "data/train_1M-00000-of-00002.parquet": b"PAR1" + b"a" * 3000,
    "data/train_1M-00001-of-00002.parquet": b"PAR1" + b"b" * 2000,
    "data/train_5M-00000-of-00001.parquet": b"PAR1" + b"c" * 9000,
    "README.md": b"# OpenMathInstruct-2",
}
"""The dataset at ``tests.fake_hub.COMMIT``: the files training stages (``train_1M``) and others it must not."""


class DatasetHub(FakeHub):
    """``FakeHub.files`` served as the dataset ``DATASET`` (a model path rewritten, the same checks and counts)."""

    def _check(self, repo: str, revision: str) -> bool:
        if repo != DATASET:
            self._error(404, "RepoNotFound", "Repository not found")
            return False
        return super()._check(REPO, revision)

    def send_header(self, keyword: str, value: str) -> None:
        # The Hub's ETags are hashes; FakeHub's name the file, whose "/" huggingface_hub would take as a folder of
        # its download's temporary file.
        super().send_header(keyword, value.replace("/", "-") if keyword == "ETag" else value)

    def _as_model(self) -> None:
        self.path = self.path.replace("/api/datasets/", "/api/models/", 1).replace("/datasets/", "/", 1)

    def do_GET(self):  # noqa: N802
        self._as_model()
        super().do_GET()

    def do_HEAD(self):  # noqa: N802
        self._as_model()
        super().do_HEAD()

    @classmethod
    def serving_dataset(cls, files: dict[str, bytes] = DATASET_FILES) -> type[DatasetHub]:
        """A Hub holding the dataset's ``files``, with a request log of its own."""
        return type("ServingDataset", (cls,), {"files": files, "ranges": [], "sent": []})


class ModelAndDatasetHub(DatasetHub):
    """``FakeHub``'s model (``REPO``: its stand-in files) beside the dataset ``DATASET`` (``DATASET_FILES``), as `up`'s
    preflight reads both; a token that has not accepted the terms (``tests.fake_hub.NOT_ACCEPTED``) is refused the
    dataset's files too."""

    dataset_request = False

    def _as_model(self) -> None:
        """A dataset's request is read as a model's, with the dataset's files; a model's stays FakeHub's."""
        self.dataset_request = self.path.startswith(("/api/datasets/", "/datasets/"))
        if self.dataset_request:
            super()._as_model()
            self.files = DATASET_FILES

    def _check(self, repo: str, revision: str) -> bool:
        return super()._check(repo, revision) if self.dataset_request else FakeHub._check(self, repo, revision)

    def do_HEAD(self):  # noqa: N802
        if self.path.startswith("/datasets/") and self._token() == NOT_ACCEPTED:
            self._error(403, "GatedRepo", "Access to dataset is restricted and you are not in the authorized list")
            return
        super().do_HEAD()
