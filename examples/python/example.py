import numpy as np
import torch
import wte
import wte.torch

# Kernels on numpy arrays, in place, no copies: float32 tables, int32 ids.
table = np.random.default_rng(0).standard_normal((50257, 64), dtype=np.float32)  # (V, C)
ids = np.array([464, 3331, 373, 3331], dtype=np.int32)        # " bank" twice
dtable = np.zeros_like(table)
wte.scatter(dtable, np.ones_like(wte.gather(table, ids)), ids)  # dtable[ids[n]] += 1
assert dtable[3331, 0] == 2.0 and dtable[464, 0] == 1.0

# A drop-in nn.Embedding: forward is wte's gather, backward wte's deterministic scatter.
emb, head = wte.torch.Embedding(50257, 64), torch.nn.Linear(64, 50257)
x = torch.randint(0, 50257, (4, 16))
loss = torch.nn.functional.cross_entropy(head(emb(x)).flatten(0, 1), x.flatten())
loss.backward()                                                 # emb.weight.grad via wte.scatter
print(f"loss {loss.item():.3f}; kernels on {wte.simd_target()}")
