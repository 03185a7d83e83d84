# Leaks through two named functions: handle_request keeps what make_record
# allocates (bytearrays of 4 KiB and a few bytes, 20,000 of them: 80 MiB).
kept = []


def make_record(i):
    return bytearray(4096 + i % 7)


def handle_request(i):
    kept.append(make_record(i))


for i in range(20000):
    handle_request(i)
