# Deep, varied stacks: random expression trees evaluated by mutually recursive functions,
# 20 to 200 frames deep, on two threads, so nearly every sample has a different stack.
import os
import random
import threading
import time

SECONDS = float(os.environ.get("WORKLOAD_SECONDS", "1"))


def build(rng, depth):
    if depth == 0 or rng.random() < 0.02:
        return ("num", rng.randint(1, 9))
    kind = rng.choice(("add", "mul", "neg", "call", "seq"))
    if kind in ("neg", "call"):
        return (kind, build(rng, depth - 1))
    return (kind, build(rng, depth - 1), build(rng, rng.randint(0, 3)))


def evaluate(node):
    return DISPATCH[node[0]](node)


def ev_num(node):
    total = 0
    for i in range(40):
        total += i * node[1]
    return total


def ev_add(node):
    return evaluate(node[1]) + evaluate(node[2])


def ev_mul(node):
    return evaluate(node[1]) * (evaluate(node[2]) % 7 + 1)


def ev_neg(node):
    return -evaluate(node[1])


def ev_call(node):
    return helper(node[1], 2)


def helper(node, n):
    if n == 0:
        return evaluate(node)
    return helper(node, n - 1)


def ev_seq(node):
    evaluate(node[2])
    return evaluate(node[1])


DISPATCH = {"num": ev_num, "add": ev_add, "mul": ev_mul, "neg": ev_neg, "call": ev_call, "seq": ev_seq}


def run(seed, deadline):
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        evaluate(build(rng, rng.randint(10, 60)))


deadline = time.monotonic() + SECONDS
other = threading.Thread(target=run, args=(2, deadline))
other.start()
run(1, deadline)
other.join()
