"""Object churn for CPython run with PYTHONMALLOC=malloc (every object hits malloc).

Usage: python3 churn.py ROUNDS

Each round builds small class instances, dicts, tuples, lists and strings,
links them into a tree, and drops it.  Prints a checksum.
"""
import sys


class Node:
    def __init__(self, key, parent):
        self.key = key
        self.parent = parent
        self.children = []
        self.attrs = {"name": "node-%d" % key, "weight": key * 0.5}


def one_round(seed):
    root = Node(seed, None)
    nodes = [root]
    for i in range(3000):
        parent = nodes[(i * 7919 + seed) % len(nodes)]
        child = Node(i, parent)
        parent.children.append(child)
        nodes.append(child)
    words = sorted(n.attrs["name"] + "/" + str(len(n.children)) for n in nodes)
    pairs = [(w, len(w)) for w in words if len(w) % 2]
    return len(pairs) + sum(len(n.children) for n in nodes)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    total = sum(one_round(r) for r in range(rounds))
    print("rounds=%d checksum=%d" % (rounds, total))


if __name__ == "__main__":
    main()
