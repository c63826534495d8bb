"""The config sections every method shares: data, train, eval.

A config file (configs/*.py) is `method base + data preset + train preset`,
then a few overrides; the method sections come from the method's dataclasses
(`schema.to_config`). Each function returns a fresh ConfigDict.
"""
from __future__ import annotations

import pathlib

import ml_collections


def _common_data(**fields) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict(dict(
      normalize='l2',           # per-image feature normalisation: 'l2' | 'none'
      bias_feature=0.0,         # > 0: a constant extra feature (a learnt label prior)
      validation_fraction=0.1,  # carved from train, for model selection
      split_seed=0,
      holdout_fraction=0.0,     # > 0: labels held out of training (zero-shot, paper 004 Table 2)
      protocol='random',        # 'random' image splits | 'leave_one_out': one label of each
                                # image (≥ 2 labels) held out, half for valid, half for test;
                                # its other labels are left out of its ranking (paper 003)
      features='visual',        # 'visual' | 'image_id': one embedding per image (paper 003)
  ))
  c.update(fields)
  return c


def synthetic_data(small: bool = False, **spec) -> ml_collections.ConfigDict:
  """The embedded planted world (data/synthetic.py): 50,000 / 5,000 images,
  Y = 2,000, d = 10,000; `small`: 4,000 / 500 images, Y = 200, d = 1,000."""
  synthetic = dict(num_labels=2000, num_features=10_000, nnz=40, mean_labels=2.0, max_labels=8,
                   group_size=8, zipf=1.0, signal=0.35, words_per_label=16, sibling_share=0.5,
                   sibling_labels=0.5, seed=0, vocabulary='planted')
  sizes = dict(num_train=50_000, num_test=5_000)
  if small:
    synthetic.update(num_labels=200, num_features=1000, signal=0.5)
    sizes = dict(num_train=4000, num_test=500)
  synthetic.update(spec)
  return _common_data(kind='synthetic', synthetic=ml_collections.ConfigDict(synthetic), **sizes)


def file_data(kind: str, train_path: str, test_path: str, labels_path: str = '',
              **fields) -> ml_collections.ConfigDict:
  """Files on disk: kind 'mulan' (ARFF + label XML) or 'libsvm' (multi-label
  libsvm / XMC text; labels_path: one label name a line, optional)."""
  if kind not in ('mulan', 'libsvm'):
    raise ValueError(f"file_data: kind={kind!r} is not 'mulan' or 'libsvm'")
  return _common_data(**{**dict(kind=kind, train_path=train_path, test_path=test_path,
                                labels_path=labels_path, feature_base=0, featurized_dir=''),
                         **fields})


def mulan_folder(folder: str, **fields) -> ml_collections.ConfigDict:
  """file_data of a folder laid out as Mulan distributes a data set:
  NAME-train.arff, NAME-test.arff and a label XML."""
  folder = pathlib.Path(folder)
  trains = sorted(folder.glob('*-train.arff')) if folder.is_dir() else []
  xmls = sorted(folder.glob('*.xml')) if folder.is_dir() else []
  if len(trains) != 1 or not xmls:
    raise ValueError(f'{folder}: expected one NAME-train.arff, its NAME-test.arff and NAME.xml '
                     f'(Mulan layout); found {[p.name for p in trains + xmls]}')
  stem = trains[0].name[:-len('-train.arff')]
  return file_data('mulan', str(trains[0]), str(folder / f'{stem}-test.arff'), str(xmls[0]),
                   **fields)


def tfds_data(name: str, data_dir: str, manual_dir: str = '') -> ml_collections.ConfigDict:
  """A tfds builder of data/tfds_builders.py, prepared from files in manual_dir."""
  return _common_data(kind='tfds', tfds_name=name, data_dir=data_dir, manual_dir=manual_dir)


def train(**overrides) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict(dict(
      batch_size=256,            # rows a step (WSABIE: pairs, or images: positives_per_row)
      positives_per_row=1,       # WSABIE: a row holds one image and up to this many of its
                                 # positive pairs, embedded and scored once for all of them
                                 # (data/batching.PairStream); 1: a pair a row
      num_epochs=15,
      max_steps=0,               # > 0 overrides num_epochs
      max_seconds=0.0,           # > 0: stop on this wall-clock budget
      log_every_steps=50,
      eval_every_steps=1000,
      evals_per_budget=0,        # > 0 with max_seconds: validate about this many times in
                                 # the budget, whatever the speed (training/loop.py)
      max_epochs_between_evals=0.0,  # > 0: validate at least every this many epochs
      eval_subset=2000,          # validation images per evaluation
      patience=4,                # evaluations without improvement before stopping
      checkpoint_every_steps=2000,
      select_metric='p@1',
      num_devices=0,             # data parallel over this many devices (0: all)
      platform='',               # '' the default backend's devices | 'cpu' | 'gpu' | 'tpu'
      steps_per_call=16,         # steps a dispatch (one lax.fori_loop; training/dispatch.py);
                                 # 1: one dispatch a step, batches built on the host
      plan_packs='auto',         # where a call's packed non-zeros are planned: 'host',
                                 # 'device', or 'auto' (the host where the devices are CPUs)
      deterministic=False,       # GPU: XLA's deterministic ops, so a resumed run equals an
                                 # uninterrupted one bit for bit; repeated rows' scatter-adds
                                 # then run in a fixed order, many times slower (docs/SCALE.md)
      probe_pairs=0))            # > 0: Alg. 1's expected draws per update on this many
                                 # training pairs at each validation (paper 003 Fig. 1)
  c.update(overrides)
  return c


def evaluation(**overrides) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict(dict(ks=(1, 5, 10), f1_k=5, batch_size=256, label_chunk=4096))
  c.update(overrides)
  return c


def assemble(method: str, method_sections: ml_collections.ConfigDict,
             data: ml_collections.ConfigDict, seed: int = 0, **sections) -> ml_collections.ConfigDict:
  """A whole config: the method's sections, data, train and eval (defaults
  unless given), and any further sections (a method's own, e.g. `words`)."""
  c = ml_collections.ConfigDict()
  c.method = method
  c.seed = seed
  c.data = data
  for name, section in method_sections.items():
    c[name] = section
  c.train = sections.pop('train', None) or train()
  c.eval = sections.pop('eval', None) or evaluation()
  for name, section in sections.items():
    c[name] = section
  return c
