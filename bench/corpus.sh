# shellcheck shell=bash
# corpus.sh - sourced by the image benchmarks: corpus_ready DIR makes the
# image corpus under DIR unless an earlier run did: DIR/train (ImageFolder,
# bench/make_corpus.py), DIR/packed-*.stoke (as `stoke pack` writes them),
# DIR/raw/packed-*.stoke (byte for byte) and DIR/tar/train-*.tar
# (WebDataset layout).  Needs $PY, $STOKE and $BENCH_DIR (lib.sh).
corpus_ready() {
  local corpus=$1
  if [ ! -d "$corpus/train" ]; then
    "$PY" "$BENCH_DIR/make_corpus.py" "$corpus/train" --images 2000 >&2
  fi
  # Packed twice: as `stoke pack` writes it (JPEGs rewritten with restart
  # markers, so crops decode from their own intervals) and byte for byte
  # (--keep-bytes: the same region decoding as the folder and the tar).
  # Shards from before the rewrite existed (no pack.json) are made again.
  if ! grep -q jpegs_rewritten "$corpus/pack.json" 2>/dev/null; then
    rm -f "$corpus"/packed-*.stoke "$corpus"/raw/packed-*.stoke
    "$STOKE" pack "$corpus/train" -o "$corpus/packed" --shard-size 32MB -q \
      --json "$corpus/pack.json"
    "$STOKE" pack "$corpus/train" -o "$corpus/raw/packed" --shard-size 32MB \
      -q --keep-bytes
  fi
  if [ ! -f "$corpus/tar/train-0000.tar" ]; then
    # WebDataset layout: key.jpg + key.cls, 500 samples a shard.
    "$PY" "$BENCH_DIR/make_tars.py" "$corpus/train" "$corpus/tar" 500
  fi
}
