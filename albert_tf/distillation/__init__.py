"""Knowledge distillation: a smaller or shallower student trained from a fine-tuned teacher.

`distill(DistillSettings(...)) -> DistillOutcome` (`run`) writes the student as a normal model
directory. The parts: `settings` (the run's settings and their check), `student` (the student's
architecture: a preset, a config, or `shared:N`, the teacher's own shared block run N times),
`transfer_set` (labelled and unlabelled examples with the teacher's outputs, computed once),
`objective` (the `DistillationModel` loss) and `losses` (soft-target KL, hidden-state MSE,
attention and value-relation KL).
"""

from albert_tf.distillation.run import DistillOutcome, distill
from albert_tf.distillation.settings import TRANSFERS, DistillError, DistillSettings

__all__ = ["DistillError", "DistillOutcome", "DistillSettings", "TRANSFERS", "distill"]
