#!/usr/bin/env python3
"""The busiest EP rank's routed rows over the mean under Megatron's
--moe-router-force-load-balancing (router logits replaced by standard normal
noise: each token's top-k is a uniformly random k of the E experts), for the
plans' "moe_imbalance".

  python3 experiments/published/moe/forced_balance.py [DRAWS]

Per token the rows landing on one EP rank (E/R experts of E) are
hypergeometric: mean k/R, variance k p (1-p) (E-k)/(E-1), p = 1/R. Over N
tokens of one EP group the R loads are normal with that variance x N and
sum fixed, so E[max] = mean + sd x E[max of R standard normals] / sqrt(1 - 1/R).
With DRAWS > 0 the two smaller cases are also drawn token by token (Monte Carlo).
N is the EP group's tokens per micro-batch: EP ranks x micro x seq / TP (SP).
"""
import math
import random
import sys


def approx(ranks, experts, k, tokens):
    p = 1.0 / ranks
    var = k * p * (1 - p) * (experts - k) / (experts - 1)
    mean = k * p
    step = 0.001
    xs = [-8 + i * step for i in range(16001)]
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))
    emax = sum(x * ranks * pdf(x) * cdf(x) ** (ranks - 1) * step for x in xs)
    return 1 + math.sqrt(var * tokens) / (mean * tokens) * emax / math.sqrt(1 - 1 / ranks)


def monte_carlo(ranks, experts, k, tokens, draws, seed=1):
    rnd = random.Random(seed)
    per_rank = experts // ranks
    total = 0.0
    for _ in range(draws):
        load = [0] * ranks
        for _ in range(tokens):
            for e in rnd.sample(range(experts), k):
                load[e // per_rank] += 1
        total += max(load) / (tokens * k / ranks)
    return total / draws


CASES = [  # plan, EP ranks, experts, top-k, EP group tokens per micro-batch
    ("qwen3-235b-a22b-256-h100-tp4ep8", 8, 128, 8, 8 * 4096 // 4),
    ("qwen3-235b-a22b-256-h100-tp2ep8-a2a", 8, 128, 8, 8 * 4096 // 2),
    ("qwen3-235b-a22b-256-h100-tp4ep8-16k", 8, 128, 8, 8 * 16384 // 4),
    ("mixtral-8x22b-128-h100-tp2ep8", 8, 8, 2, 8 * 4096 // 2),
    ("qwen3-235b-a22b-256-gb200-tp1ep8", 8, 128, 8, 8 * 4096),
    ("qwen3-235b-a22b-256-h100-tp2ep32", 32, 128, 8, 32 * 4096 // 2),
]

if __name__ == "__main__":
    draws = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    for name, r, e, k, n in CASES:
        line = "%-60s %.4f" % (name, approx(r, e, k, n))
        if draws and n <= 16384:
            line += "   Monte Carlo %.4f (%d draws)" % (monte_carlo(r, e, k, n, draws), draws)
        print(line)
