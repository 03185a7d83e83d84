"""A growing cache to attach to, driven by standard input:
grow N   add N entries of 10,000 bytes (prints the entry count)
end      print "done" and exit"""
import sys

cache = {}
for line in sys.stdin:
    words = line.split()
    if words and words[0] == "grow":
        start = len(cache)
        for i in range(start, start + int(words[1])):
            cache[i] = bytes([i % 251]) * 10000
        print("size", len(cache), flush=True)
    elif words and words[0] == "end":
        print("done", flush=True)
        break
