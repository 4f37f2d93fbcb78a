"""Samples per second of scikit-learn's IncrementalPCA on MNIST, for comparison with
`cargo bench -p stolr-benches --bench msg` (same 10 000 test images, centred and scaled to
E||x||^2 = 1, k = 8). Usage: python3 sklearn_ipca.py [MNIST_DIR]."""
import gzip
import sys
import time

import numpy as np
from sklearn.decomposition import IncrementalPCA

mnist = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/mnist"
with gzip.open(f"{mnist}/t10k-images-idx3-ubyte.gz") as f:
    x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 784).astype(np.float64)
x -= x.mean(axis=0)
x /= np.sqrt((x * x).sum(axis=1).mean())
for batch in (10, 100, 1000):
    model = IncrementalPCA(n_components=8, batch_size=batch)
    start = time.perf_counter()
    for i in range(0, len(x), batch):
        model.partial_fit(x[i : i + batch])
    elapsed = time.perf_counter() - start
    print(f"IncrementalPCA k=8 batch={batch}: {len(x) / elapsed:.0f} samples/s")
