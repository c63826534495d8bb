"""The last word when JAX's runtime aborts a process of several.

When process 0 dies, the coordination service goes with it, and JAX's runtime
in every other process polls that error and aborts in C++ within milliseconds:
a fatal log line, a native stack and Python's faulthandler dump, about 50
lines, before `hosts.Peers` can name the cause (the runtime's error callback
cannot be replaced from Python in jaxlib 0.10: docs/MULTIHOST.md "Limits").

So a process of several writes its stderr through a small process of its own
(`install`; this file run as a script, nothing imported): bytes pass as they
come until the runtime's report begins; that report goes to a file, and once
the process is gone the filter prints one line in its place: what stopped
the run, the step, the last checkpoint and the file. The training process
tells it where the run is (`tell`: a record on stderr the filter takes out).
Nothing here imports JAX: the filter starts in milliseconds.
"""
from __future__ import annotations

import atexit
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile

# A record for the filter, never shown: RS, a key, a space, the value, LF.
_RECORD = re.compile(rb'\x1ewsabie:(\w+) ([^\n]*)\n')
_RECORD_START = b'\x1ewsabie:'
# The runtime's report: its first lines (the service unreachable, an error it
# polled), then the fatal one.
_REPORT_STARTS = (b'Failed to retrieve preemption notice from coordination service',
                  b'Polled an error from coordination service')
_FATAL = b'JAX distributed service detected fatal errors'
_REPORT_LINES_BEFORE_FATAL = 20  # (four in jaxlib 0.10) else the report stopped nothing
# A glog warning, error or fatal line's header ('E1128 12:22:38.574866 …'),
# wherever it begins (after a progress bar's unfinished line too): the line
# is held whole before it is shown, in case it opens the report.
_GLOG = re.compile(rb'[WEF]\d{4} \d\d:\d\d:\d\d\.\d{6} ')
_GLOG_SHAPE = b'W1128 12:25:38.114472 '  # its shape, for a header cut by a read
# What the report says when the service itself is gone (process 0 died).
_SERVICE_GONE = (b'Socket closed', b'Connection refused', b'failed to connect', b'UNAVAILABLE')

_INSTALLED: dict = {}  # the filter's process and the real stderr's fd, once installed


def last_checkpoint(checkpoints: pathlib.Path | None) -> int | None:
  """The newest step committed in a checkpoint folder (Orbax names a step's
  folder by its number once written whole): a save cut short is not one."""
  if checkpoints is None or not checkpoints.is_dir():
    return None
  return max((int(p.name) for p in checkpoints.iterdir() if p.name.isdigit()), default=None)


def describe(step: int | None, checkpoints: pathlib.Path | None) -> str:
  """' at step N; the last checkpoint is step M; restart …' (after a reason)."""
  if step is None and checkpoints is None:
    return ' before training began'
  at = f' at step {step}' if step is not None else ''
  last = last_checkpoint(checkpoints)
  kept = f'the last checkpoint is step {last}' if last is not None else 'no checkpoint was saved yet'
  return f'{at}; {kept}; restart every process to resume'


class Filter:
  """Bytes in (`feed`), bytes to show out; `end` when the process is gone."""

  def __init__(self, report_dir: str | None = None):
    self.where: dict[str, str] = {}
    self.report_dir = report_dir
    self._pending = b''    # a record or a glog error line not yet whole
    self._held = None      # the report from its first line, once begun
    self._fatal = False    # the report reached the runtime's fatal line

  def feed(self, data: bytes) -> bytes:
    data, out = self._pending + data, []
    self._pending = b''
    while data:
      if self._held is not None:  # within the report: nothing shown from here
        self._held += _without_records(data, self.where)
        self._fatal = self._fatal or _FATAL in self._held
        if not self._fatal and self._held.count(b'\n') > _REPORT_LINES_BEFORE_FATAL:
          out.append(self._held)  # an error that stopped nothing: shown after all
          self._held = None
        break
      start = _next_special(data)
      if start < 0:
        keep = _may_begin_special(data)
        out.append(data[:keep])
        self._pending = data[keep:]
        break
      out.append(data[:start])
      data = data[start:]
      line_end = data.find(b'\n')
      if line_end < 0:  # the rest of the record or line is still to come
        self._pending = data
        break
      line, data = data[:line_end + 1], data[line_end + 1:]
      if line.startswith(_RECORD_START):
        _without_records(line, self.where)
      elif _FATAL in line or any(start in line for start in _REPORT_STARTS):
        self._held = line  # the rest joins it (the loop's next turn)
        self._fatal = _FATAL in line
      else:
        out.append(line)
    return b''.join(out)

  def end(self) -> bytes:
    """What to show once the process has exited: the held report when it
    stopped nothing, else one line in its place (the report kept in a file)."""
    rest, self._pending = self._pending, b''
    if self._held is None:
      return rest
    held, self._held = self._held + rest, None
    if not self._fatal:
      return held
    fd, path = tempfile.mkstemp(prefix='wsabie-jax-abort-', suffix='.txt', dir=self.report_dir)
    with os.fdopen(fd, 'wb') as f:
      f.write(held)
    cause = ('process 0 (the coordinator) stopped answering'
             if any(s in held for s in _SERVICE_GONE)
             else "JAX's runtime stopped this process (another process failed: see its output)")
    step, checkpoints = self.where.get('step'), self.where.get('checkpoints')
    where = describe(step and int(step), checkpoints and pathlib.Path(checkpoints))
    return f'error: {cause}{where} (the runtime\'s report: {path})\n'.encode()


def _next_special(data: bytes) -> int:
  """Where the next record or glog warning/error line begins in `data`, else -1."""
  starts = [data.find(_RECORD_START)]
  glog = _GLOG.search(data)
  starts += [glog.start()] if glog else []
  starts = [s for s in starts if s >= 0]
  return min(starts) if starts else -1


def _may_begin_special(data: bytes) -> int:
  """Where a record or a glog header may begin in `data`'s tail, cut before
  it is whole (that tail waits for the next read); else len(data)."""
  rs = data.rfind(b'\x1e')
  if rs >= 0 and _RECORD_START.startswith(data[rs:]):
    return rs
  for at in range(max(len(data) - len(_GLOG_SHAPE) + 1, 0), len(data)):
    if data[at:at + 1] in (b'W', b'E', b'F') and all(
        (c in b'0123456789') == (shape in b'0123456789') and (c == shape or shape in
                                                              b'0123456789WEF')
        for c, shape in zip(data[at + 1:], _GLOG_SHAPE[1:])):
      return at
  return len(data)


def _without_records(data: bytes, where: dict) -> bytes:
  for m in _RECORD.finditer(data):
    where[m.group(1).decode()] = m.group(2).decode(errors='replace')
  return _RECORD.sub(b'', data)


def install() -> None:
  """This process's stderr through the filter from here on (once); at a normal
  exit the filter is handed what is left and waited for."""
  if _INSTALLED:
    return
  read, write = os.pipe()
  shown = os.dup(2)
  proc = subprocess.Popen([sys.executable, '-S', os.path.abspath(__file__)], stdin=read,
                          stdout=shown, stderr=shown, start_new_session=True)
  os.close(read)
  sys.stderr.flush()
  os.dup2(write, 2)
  os.close(write)
  _INSTALLED.update(proc=proc, shown=shown)
  atexit.register(_uninstall)


def _uninstall() -> None:
  try:
    sys.stderr.flush()
  except (OSError, ValueError):
    pass
  os.dup2(_INSTALLED['shown'], 2)  # the pipe's last writer gone: the filter ends
  try:
    _INSTALLED['proc'].wait(timeout=5)
  except subprocess.TimeoutExpired:
    pass


def tell(key: str, value) -> None:
  """Where the run is, for the line the filter may print (no-op without it;
  None, not yet known, is not told)."""
  if _INSTALLED and value is not None:
    try:
      os.write(2, b'\x1ewsabie:' + key.encode() + b' ' + str(value).encode() + b'\n')
    except OSError:
      pass


def _main() -> None:
  # Its own session: the terminal's Ctrl-C and hang-up go to the training
  # process, which may still print; the filter ends when its input does.
  for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, signal.SIG_IGN)
  filt = Filter()
  while True:
    try:
      chunk = os.read(0, 1 << 16)
    except InterruptedError:
      continue
    if not chunk:
      break
    _write(filt.feed(chunk))
  _write(filt.end())


def _write(data: bytes) -> None:
  while data:
    try:
      data = data[os.write(1, data):]
    except OSError:  # nobody reads any more
      return


if __name__ == '__main__':
  _main()
