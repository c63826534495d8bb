# The accelerator figures docs/SCALE.md still lacks, in one call on a GPU or
# TPU host (about five minutes on one H200):
#   1. the accelerator grid's slow rows (Y = 10k; B 4,096 K 100 and B 1,024
#      K 1,000) with the step alone from a trained model and both call lengths,
#      and each row's loop traced (how busy the device was: grid.json's
#      'profile'; the first row's trace as $OUT/trace_first_row.json.gz);
#   2. the web-scale shards (NTRAIN images) and one epoch streamed from them:
#      pairs/s, the loop's wait for input, test p@1, 8 of its calls traced;
#   3. the streamed input alone on those shards, 1-8 threads;
#   4. (not with SMALL=1) the accelerator suite's panel table on Corel5k: the
#      Mulan config end to end beside the peers on every CPU thread.
#   OUT=dir END=seconds NTRAIN=images WORKERS=n bash launch/device_figures.sh
# Each step is cut at END seconds from the start; tables and logs go to $OUT.
# SMALL=1: the same steps at tiny sizes (a minute on a CPU: to try it first).
set -o pipefail
T0=$(date +%s); END=${END:-345}; NTRAIN=${NTRAIN:-10000000}; WORKERS=${WORKERS:-16}
PY=${PY:-python3}; OUT=${OUT:-/tmp/device_figures}; SHARDS=${SHARDS:-/tmp/wsabie_webscale_shards}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
left() { echo $((END - ($(date +%s) - T0))); }
quiet() { grep -v '^[IWE][0-9]\{4\}\|onstant fold\|reduce-window\|necessarily a bug\|file a bug\|The operation took\|^$'; }
$PY -c "import jax; print('jax', jax.__version__, jax.devices())"
echo "== grid, Y = $([ "${SMALL:-0}" = 1 ] && echo 500 || echo 10,000) ($(left) s left)"
timeout "$(left)" $PY - "$OUT" "${SMALL:-0}" "${OUT}_profiles" <<'PYTHON' 2>&1 | quiet | tee "$OUT/grid.log"
import json, pathlib, shutil, sys
import jax
from wsabie_jax.benchmarks import accelerator
from wsabie_jax.training import settings
per_call = settings.for_platform(settings.train(), jax.devices()[0].platform)['steps_per_call']
small = bool(int(sys.argv[2]))
rows = accelerator.grid(small, 0.5 if small else 3.0, per_call, labels=[500] if small else [10_000],
                        shapes=[(256, 10)] if small else [(4096, 100), (1024, 1000)],
                        profile_dir=sys.argv[3])
json.dump(rows, open(f'{sys.argv[1]}/grid.json', 'w'), indent=1)
traces = sorted(pathlib.Path(sys.argv[3], f"Y{rows[0]['Y']}_B{rows[0]['B']}_K{rows[0]['K']}")
                .rglob('*.trace.json.gz'))
if traces:
  shutil.copy(traces[-1], f'{sys.argv[1]}/trace_first_row.json.gz')
PYTHON
WS="--config=configs/wsabie_webscale.py --config.data.shards_dir=$SHARDS --config.data.num_train=$NTRAIN --config.data.shard_size=125000"
[ "${SMALL:-0}" = 1 ] && WS="$WS --config.data.shard_size=1500 --config.data.synthetic.num_labels=1000 --config.data.num_valid=500 --config.data.num_test=500 --config.train.batch_size=256"
echo "== web-scale shards, $NTRAIN train images ($(left) s left)"
timeout "$(left)" $PY launch/make_shards.py $WS --workers="$WORKERS" 2>&1 | quiet | tail -3
echo "== one web-scale epoch streamed from them ($(left) s left)"
RUN=${SHARDS%/}_run; rm -rf "$RUN"
timeout "$(left)" $PY launch/train.py $WS --workdir="$RUN" --config.train.profile_calls=8 2>&1 | quiet | tail -20 | tee "$OUT/webscale.log"
# Its metrics with what its 8 traced calls show (training/profile.py): the device's busy share, the input wait.
[ -f "$RUN/metrics.json" ] && $PY -c "import json, sys; from wsabie_jax.training import profile
m = json.load(open(sys.argv[1] + '/metrics.json'))
try: m['profile'] = profile.summary(sys.argv[1] + '/profile')
except Exception as e: m['profile'] = {'error': repr(e)[:300]}
json.dump(m, open(sys.argv[2], 'w'), indent=1); print('profile', m['profile'])" "$RUN" "$OUT/webscale_metrics.json"
echo "== the streamed input alone ($(left) s left)"
timeout "$(left)" $PY launch/benchmark.py --suite=input $([ "${SMALL:-0}" = 1 ] && echo --small) --accelerator_webscale_shards="$SHARDS" --out="$OUT/input.json" 2>&1 | quiet | tail -9
if [ "${SMALL:-0}" != 1 ]; then
  echo "== the panel table on Corel5k, the peers on every thread ($(left) s left)"
  timeout "$(left)" $PY launch/benchmark.py --suite=accelerator --accelerator_tables=panel --panel=corel5k --budget_seconds=30 --out="$OUT/panel.json" 2>&1 | quiet | grep -v '^step ' | tail -20
fi
echo "== done after $(( $(date +%s) - T0 )) s"
