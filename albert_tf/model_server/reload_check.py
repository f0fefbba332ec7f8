"""The fresh process of an export's reload check (`albert_tf.export.compatibility.check_reload`).

`python -m albert_tf.model_server.reload_check SAVED_MODEL_DIR INPUTS.npz OUTPUTS.npz` loads the
SavedModel the way TF Serving does (`SessionServable`: TF1 loader, restore, init op), runs every
signature on the inputs and writes the outputs. The export starts it by module name, so that the
export layer depends on nothing of the server.

`--serve` does the same for every request line `["SAVED_MODEL_DIR", "INPUTS.npz", "OUTPUTS.npz"]`
on stdin, each in its own graph and session, and answers each with one line on stdout:
`compatibility.REPLY_PREFIX` and `{"ok": true}` or `{"ok": false, "error": "<traceback>"}`. It
ends at the end of stdin, or after IDLE_SECONDS without a request (`compatibility.ReloadProcess`
keeps one per exporting process, so an idle one gives its memory back).
"""

from __future__ import annotations

import json
import select
import sys
import traceback
from typing import Optional, Sequence, TextIO

from albert_tf.export.compatibility import REPLY_PREFIX, load_arrays, save_arrays
from albert_tf.model_server.servable import SessionServable

USAGE = "usage: python -m albert_tf.model_server.reload_check (SAVED_MODEL_DIR INPUTS.npz OUTPUTS.npz | --serve [IDLE_SECONDS])"


def reload_and_run(saved_model_dir: str, inputs_path: str, outputs_path: str) -> None:
    """Loads the SavedModel as TF Serving does and writes every signature's outputs."""
    servable = SessionServable(saved_model_dir)
    try:
        inputs = load_arrays(inputs_path)
        save_arrays(outputs_path, {signature: servable.run(signature, values) for signature, values in inputs.items()})
    finally:
        servable.close()


def serve(requests: TextIO, replies: TextIO, idle_s: Optional[float] = None) -> int:
    """Answers request lines until the end of `requests`, or until none came for `idle_s` seconds
    (see the module docstring). Exits with 0 either way."""
    while True:
        # One request at a time (the next comes after this reply): nothing waits in the buffer.
        if idle_s is not None and not select.select([requests], [], [], idle_s)[0]:
            return 0
        line = requests.readline()
        if not line:
            return 0
        try:
            saved_model_dir, inputs_path, outputs_path = json.loads(line)
            reload_and_run(saved_model_dir, inputs_path, outputs_path)
            reply = {"ok": True}
        except Exception:  # noqa: BLE001 - every failure goes back to the exporting process
            reply = {"ok": False, "error": traceback.format_exc()}
        replies.write(REPLY_PREFIX + json.dumps(reply) + "\n")
        replies.flush()


def main(argv: Sequence[str]) -> int:
    if argv and argv[0] == "--serve" and len(argv) <= 2:
        return serve(sys.stdin, sys.stdout, float(argv[1]) if len(argv) == 2 else None)
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    reload_and_run(*argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
