# Run by python3 with PYTHONMALLOC=malloc (every object through malloc) under
# the shim. Deterministic output (run with PYTHONHASHSEED=0).
import collections
import hashlib
import json
import re
import threading

words = ["w%d" % ((i * 7919) % 5003) for i in range(20000)]
counts = collections.Counter(words)
print("distinct", len(counts), "most", counts.most_common(3))
data = {k: [v, str(v) * 3, {"n": v}] for k, v in sorted(counts.items())[:2000]}
text = json.dumps(data, sort_keys=True)
print("json", len(text), hashlib.sha256(text.encode()).hexdigest())
print("roundtrip", json.loads(text) == data)
print("regex", len(re.findall(r"w(\d+)7", " ".join(words))))

results = [0] * 8


def work(t):
    acc = []
    for i in range(3000):
        acc.append(bytes(i % 200) + str(t * i).encode())
    results[t] = sum(len(a) for a in acc)


threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads", results)
big = [list(range(i % 50)) for i in range(20000)]
print("big", sum(map(len, big)))
