"""leave(): end a torch.distributed program without the interpreter's
teardown.

torch's ProcessGroupGloo may still be destroying a finished Work on its own
thread when the main thread returns. When that Work holds a tensor with a
Python object, the Gloo thread takes the GIL while the interpreter
finalizes, is made to exit, and the unwinding through a noexcept destructor
aborts the process: "terminate called without an active exception", exit
signal 6. A core of it (tests/python/ranks.py) showed
ProcessGroupGloo::runLoop -> ~AsyncAllgatherCoalescedWork ->
decref_pyobject -> take_gil -> pthread_exit. It is torch's race, not
cohort's: it hit the gloo anchor runs of accelerate_train.py, ddp_train.py,
lightning_train.py and tp_generate.py in CI, with cohort not imported, a
few times in a hundred runs under load. These programs write their results
before calling leave(), so skipping the teardown loses nothing."""

import os
import sys


def leave(code=0):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
