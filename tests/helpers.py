"""Test shorthands: a WSABIE StepConfig from flat keyword arguments."""
from wsabie_jax.wsabie import step as step_lib

_MODEL = {'dim', 'max_norm', 'score', 'matmul_precision', 'init_std', 'tables'}


def step_config(num_labels: int, *, loss: str = 'warp', optimizer: str = 'sgd',
                learning_rate: float = 0.05, adagrad_init: float = 0.1, l2: float = 0.0,
                **fields):
  """StepConfig(num_labels, ...) with model fields (dim, max_norm, score), the
  loss kind and the loss fields given flat; plain SGD unless told."""
  model = {k: fields.pop(k) for k in list(fields) if k in _MODEL}
  return step_lib.StepConfig(
      num_labels, model=step_lib.ModelConfig(**model),
      loss=step_lib.LossConfig(kind=loss, **fields),
      optim=step_lib.OptimConfig(kind=optimizer, learning_rate=learning_rate,
                                 adagrad_init=adagrad_init, l2=l2))
