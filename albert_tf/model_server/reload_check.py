"""The fresh process of an export's reload check (`albert_tf.export.compatibility.check_reload`).

`python -m albert_tf.model_server.reload_check SAVED_MODEL_DIR INPUTS.npz OUTPUTS.npz` loads the
SavedModel the way TF Serving does (`SessionServable`: TF1 loader, restore, init op), runs every
signature on the inputs and writes the outputs. The export starts it by module name, so that the
export layer depends on nothing of the server.
"""

from __future__ import annotations

import sys
from typing import Sequence

from albert_tf.export.compatibility import load_arrays, save_arrays
from albert_tf.model_server.servable import SessionServable


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m albert_tf.model_server.reload_check SAVED_MODEL_DIR INPUTS.npz OUTPUTS.npz",
              file=sys.stderr)
        return 2
    saved_model_dir, inputs_path, outputs_path = argv
    servable = SessionServable(saved_model_dir)
    try:
        inputs = load_arrays(inputs_path)
        save_arrays(outputs_path, {signature: servable.run(signature, values) for signature, values in inputs.items()})
    finally:
        servable.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
