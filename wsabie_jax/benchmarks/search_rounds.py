"""The search that chose configs/wsabie_mulan.py's settings: each round a list
of candidates for `panel_search.choose` (launch/benchmark.py --suite=panel_search
--panel_round=N), each a dict of fitting knobs (wsabie/fitting.Rules) and
config overrides ('section.field': value). docs/TUNING.md has each round's
figures and what it decided.
"""

# The search run to choose configs/wsabie_mulan.py's settings: round 1 varies
# one setting at a time from the first; round 2 combines round 1's best (more
# steps a epoch's worth of bigger batches; a lower rate). README "Defaults
# across data" has its figures.
ROUND_1 = [
    {},
    {'knobs': {'steps_per_epoch': 25}},
    {'knobs': {'steps_per_epoch': 400}},
    {'knobs': {'max_draws': 20}},
    {'overrides': {'optim.learning_rate': 0.03}},
    {'overrides': {'optim.learning_rate': 0.003}},
    {'overrides': {'model.dim': 64}},
    {'overrides': {'loss.violators': 'first', 'loss.rank_estimate': 'first_violator'}},
    {'overrides': {'model.max_norm': 1.0}},
    {'overrides': {'data.bias_feature': 0.0}},
    # fast: LightFM's pace (a few draws, big batches, its D)
    {'knobs': {'steps_per_epoch': 25, 'max_draws': 10}, 'overrides': {'model.dim': 64}},
    {'knobs': {'steps_per_epoch': 25, 'max_draws': 10},
     'overrides': {'model.dim': 64, 'optim.learning_rate': 0.05}},
]
ROUND_2 = [
    {'knobs': {'steps_per_epoch': 25}},
    {'knobs': {'steps_per_epoch': 25}, 'overrides': {'optim.learning_rate': 0.005}},
    {'knobs': {'steps_per_epoch': 50}, 'overrides': {'optim.learning_rate': 0.005}},
    {'knobs': {'steps_per_epoch': 25}, 'overrides': {'optim.learning_rate': 0.003}},
    {'knobs': {'steps_per_epoch': 25}, 'overrides': {'model.dim': 64}},
]
# Round 3, after rows of an image's pairs (train.positives_per_row): how many
# steps an epoch now, against round 2's choice (a pair a row, 25).
ROUND_3 = [
    {'knobs': {'group_pairs': False, 'steps_per_epoch': 25}},
    {'knobs': {'steps_per_epoch': 25}},
    {'knobs': {'steps_per_epoch': 12}},
    {'knobs': {'steps_per_epoch': 6}},
]
# Round 4, after cheaper draws and packing: fewer, bigger steps an epoch (the
# small sets' fixed cost a step), with and without a higher rate.
ROUND_4 = [
    {'knobs': {'steps_per_epoch': 6}},
    {'knobs': {'steps_per_epoch': 3}},
    {'knobs': {'steps_per_epoch': 2}},
    {'knobs': {'steps_per_epoch': 3}, 'overrides': {'optim.learning_rate': 0.02}},
]
# Round 5: a floor under B, for the smallest sets (a step's fixed cost).
ROUND_5 = [
    {},
    {'knobs': {'min_batch': 128}},
    {'knobs': {'min_batch': 256}},
    {'knobs': {'min_batch': 256}, 'overrides': {'optim.learning_rate': 0.02}},
]
# Round 6, on the sets whose K covers every negative (Y − 1 ≤ 100): the exact
# rank there (every label scored, its violators counted: eq. (6) with (7)) for
# K draws, at the draws' rate and either side of it.
ROUND_6 = [
    {'knobs': {'exact_ranks': False}},
    {'knobs': {'exact_learning_rate': 0.01}},
    {'knobs': {'exact_learning_rate': 0.02}},
    {'knobs': {'exact_learning_rate': 0.005}},
]
# Round 7: the max-norm bound C (paper 000 eqs. (2)–(3)), on the six small
# sets and on Delicious and the stand-ins (docs/TUNING.md "The max-norm bound C").
ROUND_7 = [{'overrides': {'model.max_norm': c}} for c in (3.0, 10.0, 100.0, float('inf'))]
# Round 8, at C 100, on Delicious and the stand-ins: the fitted rate, B and K.
ROUND_8 = [
    {},
    {'overrides': {'optim.learning_rate': 0.02}},
    {'overrides': {'optim.learning_rate': 0.005}},
    {'knobs': {'steps_per_epoch': 12}},
    {'knobs': {'max_draws': 300}},
]
# Round 9, on the sets round 8's large rate applies to (rows ≥ steps_per_epoch·
# max_batch: Delicious and the stand-ins text, many_labels, many_tags), after
# balanced batches made steps cheaper: that rate and two higher.
ROUND_9 = [{'knobs': {'large_learning_rate': lr}} for lr in (0.02, 0.035, 0.05)]
# Round 10, on the same sets at round 9's rate, with the labels read whole up
# to Y ≤ 24·(K+Q) (wsabie/table_reads.py): fewer draws K there (a step's cost
# grows with K; text's pairs/s was half LightFM(10)'s at 60 s). K stays 100.
ROUND_10 = [{'knobs': {'large_max_draws': k}} for k in (100, 50, 25)]
# Round 11, on many_tags (the one set whose labels are gathered): the batch's
# rows sharing their draws (wsabie/batch_draws.py), at K 100 and more; B 1,024
# as the rules then fitted it.
_B1024 = {'overrides': {'train.batch_size': 1024}}
ROUND_11 = [{**_B1024, 'knobs': {'batch_draws': False}}] + [
    {**_B1024, 'knobs': {'batch_max_draws': k}} for k in (100, 300, 1000, 3000)]
# Round 12, on many_tags with round 11's shared draws (K 300): a higher rate and
# smaller batches (more steps an epoch) for its first seconds.
ROUND_12 = [{'overrides': {'train.batch_size': b, **({'optim.learning_rate': lr} if lr else {})}}
            for b, lr in ((1024, None), (1024, 0.1), (1024, 0.2), (256, None), (256, 0.1))]
# Round 13, on tmc2007-500 (its test p@1 level with LightFM's, its validation
# p@1 flat after a few seconds): the exact rank's rate either side, the draws
# instead of the exact rank, a wider D, no bound, no bias feature.
ROUND_13 = [
    {},
    {'knobs': {'exact_learning_rate': 0.01}},
    {'knobs': {'exact_learning_rate': 0.0025}},
    {'knobs': {'exact_ranks': False}},
    {'overrides': {'model.dim': 256}},
    {'overrides': {'model.max_norm': float('inf')}},
    {'overrides': {'data.bias_feature': 0.0}},
]
# Round 14, on many_labels (it overfits after seconds at the large rate):
# Alg. 1's first violator as LightFM takes it, more draws, more draws at a lower rate.
ROUND_14 = [
    {},
    {'overrides': {'loss.violators': 'first', 'loss.rank_estimate': 'first_violator'}},
    {'knobs': {'large_max_draws': 300}},
    {'knobs': {'large_max_draws': 300, 'large_learning_rate': 0.02}},
]
# Round 15: the config alone, beside LightFM on the same validation split
# (--panel_search_peer). Past a minute the SELECTIONS reads come after a set's
# peak in its first seconds (many_labels'), where a run of the config validates
# every few epochs: ours' row then reads low (docs/RESULTS.md).
ROUND_15 = [{}]
# Round 16, on Delicious (short of LightFM max_sampled = Y's test p@1 over three
# seeds, level on MAP), then on many_labels and text: more draws, the exact
# rank over every label at its own rate and at the large one, a wider D, Alg.
# 1's first violator.
ROUND_16 = [
    {},
    {'knobs': {'large_max_draws': 300}},
    {'overrides': {'loss.kind': 'exact'}},
    {'overrides': {'loss.kind': 'exact', 'optim.learning_rate': 0.05}},
    {'overrides': {'model.dim': 256}},
    {'overrides': {'loss.violators': 'first', 'loss.rank_estimate': 'first_violator'}},
]
# Round 17, on many_tags (its pairs/s at 300 s under half LightFM's, whose
# late epochs cost little): the shared-draws step at B 256 takes 1.8 ms and at
# B 512 2.1 ms (--suite=profile), so half the steps an epoch nearly doubles
# pairs/s; is the early quality that chose B 256 (round 12) kept?
ROUND_17 = [{}, {'knobs': {'batch_steps_per_epoch': 12}}]
# Round 18, on the sets whose rows draw negatives (Delicious, text, many_labels,
# Corel5k, small_text; many_tags' shared by the batch): Alg. 1's first violator,
# the one update a pair LightFM's WARP makes, against every violator counted.
# Ahead where a row's own draws serve few positives (Q ≤ 5), behind where they
# serve ~20 or are shared: fitting.Rules.first_violator_max_positives.
ROUND_18 = [{}, {'overrides': {'loss.violators': 'first', 'loss.rank_estimate': 'first_violator'}}]
# Round 19, on the sets whose rows serve many positives with the labels read whole
# (Delicious, many_labels: Q 21-22), where round 16's exact rank at the large rate
# led at 20 s and lost only on text (Q 5, now round 18's first violator): at 60 s.
ROUND_19 = [{}, {'overrides': {'loss.kind': 'exact', 'optim.learning_rate': 0.05}}]
# Round 20, on many_labels at a long budget (300 s), where LightFM Y passes
# ours after a minute (0.899 against 0.892 at 300 s): ours peaks within a
# minute at the exact rank's large rate and its drops end the run; does a
# lower rate from the start, or smaller batches, reach a higher peak?
ROUND_20 = [{}, {'overrides': {'optim.learning_rate': 0.02}},
            {'overrides': {'optim.learning_rate': 0.01}},
            {'overrides': {'train.batch_size': 256}}]
# Round 21, on the sets where the libraries lead (medical, scene, Delicious,
# debtags; issue: p@1 level with them): the loss those one-vs-rest models
# share in spirit, a softmax over the labels (sampled, log-q corrected), at
# the fitted rate (0.005 small sets, 0.05 large) and at 0.02 and 0.1.
ROUND_21 = [{}, {'overrides': {'loss.kind': 'softmax'}},
            {'overrides': {'loss.kind': 'softmax', 'optim.learning_rate': 0.02}},
            {'overrides': {'loss.kind': 'softmax', 'optim.learning_rate': 0.1}}]
# Round 22, on debtags (its 20% split holds 4,787 packages, a p@1 there
# moves by 0.004 a standard error; the trees read 0.925): regularisation the
# one-vs-rest models have and the config leaves loose (l2 on the touched rows,
# a tighter bound C) and a D near Y (433).
ROUND_22 = [{}, {'overrides': {'optim.l2': 1e-4}}, {'overrides': {'optim.l2': 1e-3}},
            {'overrides': {'model.max_norm': 10.0}}, {'overrides': {'model.dim': 384}}]
# Round 23, on the text sets (debtags, Delicious, medical, enron): word counts
# damped before the unit norm (data.normalize='log_l2'), as the libraries'
# tf-idf damps frequent words, without a corpus statistic to store.
ROUND_23 = [{}, {'overrides': {'data.normalize': 'log_l2'}}]
# Round 24, on every set: paper 000 Table 7's ensemble with its One-vs-Rest
# model beside WSABIE (model.ensemble; 'member': 'one_vs_rest' scores it beside the
# kept state at the weight a run would choose; docs/RESULTS.md "The One-vs-Rest member").
ROUND_24 = [{}, {'member': 'one_vs_rest'}]
# Round 25, on every set: a logistic One-vs-Rest member beside the PA-I one where
# its L-BFGS passes are cheap ('member': True, the config's model.ensemble 'auto';
# validation picks the member and its weight).
ROUND_25 = [{'member': 'one_vs_rest'}, {'member': True}]
SEARCH = {1: ROUND_1, 2: ROUND_2, 3: ROUND_3, 4: ROUND_4, 5: ROUND_5, 6: ROUND_6, 7: ROUND_7,
          8: ROUND_8, 9: ROUND_9, 10: ROUND_10, 11: ROUND_11,
          12: ROUND_12, 13: ROUND_13, 14: ROUND_14,
          15: ROUND_15, 16: ROUND_16, 17: ROUND_17, 18: ROUND_18, 19: ROUND_19, 20: ROUND_20,
          21: ROUND_21, 22: ROUND_22, 23: ROUND_23, 24: ROUND_24, 25: ROUND_25}
