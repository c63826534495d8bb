"""ml_collections configs, one file a setting; `base_config` picks one by name."""
import importlib
import importlib.util
import pathlib


def base_config(data: str, small: bool = False):
  """The WSABIE config a table runs on: 'corel5k', 'synthetic' (their `small`
  versions for tests), or any config file with its argument —
  'configs/wsabie_lear.py:espgame', 'configs/wsabie_folder.py:DATA_DIR' — so
  the papers' tables run on real data where it is available."""
  if data in ('corel5k', 'synthetic'):
    module = importlib.import_module(f'configs.wsabie_{data}')
    return module.get_config('small' if small else None)
  if small:
    raise ValueError('--small runs on corel5k or synthetic only')
  path, _, arg = data.partition(':')
  if not path.endswith('.py') or not pathlib.Path(path).is_file():
    raise ValueError(f'--data={data!r}: expected corel5k, synthetic or configs/FILE.py[:ARG]')
  spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg) if arg else module.get_config()
