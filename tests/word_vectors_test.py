"""Pretrained word vectors: both text formats, alignment to labels, bad files."""
import numpy as np
import pytest

from wsabie_jax.skipgram import word_vectors
from wsabie_jax.data import DataError, synthetic


@pytest.mark.parametrize('header', [True, False])  # word2vec text | GloVe text
def test_round_trip_and_selection(tmp_path, header):
  words = ['the', 'new york', 'Dog', 'cat', 'tree']
  vectors = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
  path = tmp_path / 'vectors.txt'
  word_vectors.write_text(path, words, vectors, header=header)
  got_words, got = word_vectors.read_text(path)
  assert got_words == words  # 'new york': a word with a space
  np.testing.assert_allclose(got, vectors, rtol=1e-5)
  kept, rows = word_vectors.read_text(path, keep={'cat'}, max_other=2)
  assert kept == ['the', 'new york', 'cat'] and rows.shape == (3, 3)


def test_align_orders_labels_then_text_only_words(tmp_path):
  words = ['dog', 'sky', 'cat', 'moon', 'sea']
  vectors = np.eye(5, dtype=np.float32)[:, :4] + 1
  table = word_vectors.align(['cat', 'Dog', 'unicorn'], words, vectors, extra_words=2)
  assert table.names == ['cat', 'Dog', 'unicorn', 'sky', 'moon']
  np.testing.assert_array_equal(table.vectors_VxD[0], vectors[2])
  np.testing.assert_array_equal(table.vectors_VxD[1], vectors[0])  # lower-case fallback
  np.testing.assert_array_equal(table.vectors_VxD[3:], vectors[[1, 3]])
  assert table.covered_Y.tolist() == [True, True, False]
  cov = table.coverage(np.array([5, 3, 2]))
  assert cov['labels_covered'] == 2 and cov['tag_coverage'] == pytest.approx(0.8)


@pytest.mark.parametrize('line,message', [
    ('dog 1 2\n', 'line 3: expected a word and 3 numbers'),
    ('dog 1 x 2\n', "line 3: the vector of 'dog' is not 3 numbers"),
    ('dog 1 nan 2\n', 'line 3: the vector of .dog. is not finite')])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
  path = tmp_path / 'bad.txt'
  path.write_text('2 3\ncat 1 2 3\n' + line)
  with pytest.raises(DataError, match=message):
    word_vectors.read_text(path)


def test_synthetic_pretrained_vectors_know_the_siblings():
  """The generator's text embedding: siblings closer than strangers, extras in groups."""
  spec = synthetic.SyntheticSpec(num_labels=400, group_size=8)
  world = synthetic.make_world(spec)
  names, vectors = synthetic.pretrained_word_vectors(spec, world, dim=100, num_extra=30)
  assert len(names) == 430 and names[5] == f'g{world.parent_Y[5]}_l5'
  unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
  cos = unit[:400] @ unit[:400].T
  same = world.parent_Y[:, None] == world.parent_Y[None, :]
  off = ~np.eye(400, dtype=bool)
  assert cos[same & off].mean() > 0.3 and abs(cos[~same].mean()) < 0.03
  g = int(names[400].split('_')[0][1:])
  assert (unit[400] @ unit[:400][world.parent_Y == g].T).mean() > 0.25
