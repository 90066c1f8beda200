"""A short workload for the pstats recordings: recursion (nc != cc), builtins and methods,
a lambda, a generator, a comprehension, a class, a function with a non-ASCII name, and a
thread. About 0.1 s under cProfile; PSTATS_REPEAT runs it that many times."""
import os
import threading


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def squares(n):
    for i in range(n):
        yield i * i


class Accumulator:
    def __init__(self):
        self.items = []

    def add(self, value):
        self.items.append(value)
        return len(self.items)


def größe(values):
    return sorted(values, key=lambda v: -v)[:3]


def text_work():
    words = " ".join(str(i) for i in range(2000)).split()
    return sum(len(w) for w in words if w.endswith("7"))


def worker(out):
    out.append(sum(squares(3000)))


def main():
    acc = Accumulator()
    for i in range(300):
        acc.add(fib(12) + i)
    results = []
    t = threading.Thread(target=worker, args=(results,))
    t.start()
    t.join()
    print(größe([x % 97 for x in acc.items]), text_work(), results[0])


if __name__ == "__main__":
    # The sampler needs a longer run than the tracing profilers to see much.
    for _ in range(int(os.environ.get("PSTATS_REPEAT", "1"))):
        main()
