"""`make rehearse`: a stack's steps rehearsed on CPU before any TPU is billed (``tools.rehearse.rehearsal``)."""
