"""GPT-2 in PyTorch, the same architecture as src/model/gpt.c: the peer that the
fixture (make_gpt_fixture.py) and the benchmark (bench/torch_gpt2.py) use.
Pre-LayerNorm blocks, learned positions, output layer tied to the token
embedding, 4x GELU (tanh) MLP; parameters flatten in llm.c's order."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.C, self.NH = C, NH
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, self.NH, C // self.NH).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.NH)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, NH, C, V, T):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied output layer

    def loss(self, x, y):
        return F.cross_entropy(self(x).reshape(-1, self.V), y.reshape(-1))

    def llmc_order(self):
        """Tensors in llm.c's ParameterTensors order, each group with whether it decays."""
        per = lambda f: [f(b) for b in self.blocks]
        return [
            ([self.wte.weight], False), ([self.wpe.weight], False),
            (per(lambda b: b.ln_1.weight), False), (per(lambda b: b.ln_1.bias), False),
            (per(lambda b: b.c_attn.weight), True), (per(lambda b: b.c_attn.bias), False),
            (per(lambda b: b.c_proj.weight), True), (per(lambda b: b.c_proj.bias), False),
            (per(lambda b: b.ln_2.weight), False), (per(lambda b: b.ln_2.bias), False),
            (per(lambda b: b.c_fc.weight), True), (per(lambda b: b.c_fc.bias), False),
            (per(lambda b: b.mlp_proj.weight), True), (per(lambda b: b.mlp_proj.bias), False),
            ([self.ln_f.weight], False), ([self.ln_f.bias], False),
        ]

    def flat(self, grad=False):
        ts = [t.grad if grad else t for group, _ in self.llmc_order() for t in group]
        return torch.cat([t.detach().reshape(-1) for t in ts])

    def adamw(self, lr, betas, eps, weight_decay):
        """AdamW with decay on matrices only, as dtrun (embeddings, biases and norms undecayed)."""
        decay = [t for group, d in self.llmc_order() if d for t in group]
        no_decay = [t for group, d in self.llmc_order() if not d for t in group]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas, eps=eps)
