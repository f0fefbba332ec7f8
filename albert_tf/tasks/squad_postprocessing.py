"""Moved to `albert_tf.tasks.squad.postprocessing`; its names are importable from here as before."""

from albert_tf.tasks.squad.postprocessing import (  # noqa: F401
    DEFAULT_MAX_ANSWER_LENGTH,
    DEFAULT_N_BEST_SIZE,
    NBest,
    NullScores,
    Predictions,
    RawResultV1,
    RawResultV2,
    evaluate_v1,
    evaluate_v2,
    postprocess_v1,
    postprocess_v2,
    squad_v1_metrics,
    squad_v2_metrics,
    write_json_atomically,
)
