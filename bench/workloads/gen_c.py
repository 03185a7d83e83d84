"""Generate a large C file for the `gcc -O2` workload.

Usage: python3 gen_c.py FUNCTIONS OUT.c

Each function has loops, a switch and a struct so the optimiser (and its
allocator traffic) has real work to do.
"""
import sys

TEMPLATE = """
struct s{i} {{ int a[8]; double d; const char *name; }};
int f{i}(int n, struct s{i} *p) {{
    int acc = {i};
    for (int k = 0; k < n; k++) {{
        switch ((k + acc) & 7) {{
        case 0: acc += p->a[k & 7] * {i}; break;
        case 1: acc ^= (int)(p->d * k); break;
        case 2: acc -= k << 2; break;
        case 3: p->a[(k + 1) & 7] = acc; break;
        case 4: acc += p->name[k & 3]; break;
        case 5: p->d += acc * 0.25; break;
        default: acc = acc * 31 + k; break;
        }}
    }}
    return acc + (n > 3 ? f{prev}(n - 1, (struct s{prev} *)p) : 0);
}}
"""


def main():
    count = int(sys.argv[1])
    with open(sys.argv[2], "w") as out:
        for i in range(count):
            out.write("struct s%d; int f%d(int n, struct s%d *p);\n" % (i, i, i))
        for i in range(count):
            out.write(TEMPLATE.format(i=i, prev=max(i - 1, 0)))


if __name__ == "__main__":
    main()
