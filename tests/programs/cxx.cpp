// C++ test program: new/delete in all forms, standard containers, exceptions
// thrown through frames that allocate. Deterministic stdout: checksums, and
// one `site` line per known allocation site (format of alloc_sites.c); the
// sites are extern "C" so their symbol names are plain.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>
#include <algorithm>

#define NOINLINE __attribute__((noinline, noclone))

struct Obj {
    long a[6]; // 48 bytes
};
struct alignas(64) Aligned {
    char x[192];
};

static Obj *keep_new[300];
static char *keep_array[200];
static Aligned *keep_aligned[50];
static Obj *keep_nothrow[40];
static volatile unsigned long sink;

extern "C" NOINLINE void cxx_site_new() {
    for (int i = 0; i < 300; i++) {
        keep_new[i] = new Obj{};
        keep_new[i]->a[0] = i;
    }
}

extern "C" NOINLINE void cxx_site_new_array() {
    for (int i = 0; i < 200; i++) {
        keep_array[i] = new char[100];
        std::memset(keep_array[i], i, 100);
    }
    for (int i = 0; i < 200; i += 2) {
        delete[] keep_array[i];
        keep_array[i] = nullptr;
    }
}

extern "C" NOINLINE void cxx_site_aligned_new() {
    for (int i = 0; i < 50; i++) {
        keep_aligned[i] = new Aligned{};
        if (reinterpret_cast<std::uintptr_t>(keep_aligned[i]) % 64 != 0) std::abort();
    }
}

extern "C" NOINLINE void cxx_site_nothrow_new() {
    for (int i = 0; i < 40; i++) {
        keep_nothrow[i] = new (std::nothrow) Obj{};
        if (!keep_nothrow[i]) std::abort();
    }
}

extern "C" NOINLINE void cxx_site_new_deleted() {
    for (int i = 0; i < 500; i++) {
        Obj *o = new Obj{};
        o->a[1] = i;
        sink += static_cast<unsigned long>(o->a[1]);
        delete o; // sized delete
    }
}

// Each level allocates a string and a vector, the innermost throws; the
// exception unwinds through every level, destroying them.
NOINLINE int thrower(int depth, int round) {
    std::string label = "level-" + std::to_string(depth) + "-round-" + std::to_string(round) +
                        " with some padding to defeat SSO";
    std::vector<int> v(static_cast<size_t>(depth) * 10 + 1, depth);
    if (depth == 0) {
        if (round % 3 == 2) throw std::out_of_range("out of range at " + label);
        throw std::runtime_error("failed at " + label);
    }
    return thrower(depth - 1, round) + v[0] + static_cast<int>(label.size());
}

static unsigned long exceptions() {
    unsigned long sum = 0;
    int caught_runtime = 0, caught_range = 0;
    for (int round = 0; round < 200; round++) {
        try {
            sum += static_cast<unsigned long>(thrower(12, round));
        } catch (const std::out_of_range &e) {
            caught_range++;
            sum += std::strlen(e.what());
        } catch (const std::runtime_error &e) {
            caught_runtime++;
            sum += std::strlen(e.what());
        }
    }
    // nested: rethrow from a catch block, std::exception_ptr
    std::exception_ptr saved;
    try {
        try {
            thrower(5, 1);
        } catch (...) {
            saved = std::current_exception();
            throw;
        }
    } catch (const std::exception &e) {
        sum += std::strlen(e.what());
    }
    try {
        std::rethrow_exception(saved);
    } catch (const std::exception &e) {
        sum += std::strlen(e.what());
    }
    std::printf("exceptions: runtime=%d range=%d\n", caught_runtime, caught_range);
    return sum;
}

static unsigned long containers() {
    unsigned long sum = 0;
    std::map<int, std::string> m;
    std::unordered_map<std::string, std::vector<int>> u;
    std::vector<std::string> words;
    for (int i = 0; i < 5000; i++) {
        std::string s = "key-" + std::to_string((i * 7919) % 5003);
        m[i % 1000] += s.substr(0, 3);
        u[s].push_back(i);
        words.push_back(std::move(s));
    }
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    for (const auto &w : words) sum = sum * 31 + w.size() + static_cast<unsigned char>(w.back());
    for (const auto &kv : m) sum += kv.second.size() * static_cast<unsigned long>(kv.first);
    for (const auto &w : words) sum += u[w].size();
    auto shared = std::make_shared<std::vector<double>>(1000, 1.5);
    std::weak_ptr<std::vector<double>> weak = shared;
    auto unique = std::make_unique<std::string>(1000, 'x');
    sum += static_cast<unsigned long>((*shared)[999] * 2) + unique->size() + weak.use_count();
    std::printf("containers: words=%zu map=%zu unordered=%zu\n", words.size(), m.size(), u.size());
    return sum;
}

int main() {
    cxx_site_new();
    cxx_site_new_array();
    cxx_site_aligned_new();
    cxx_site_nothrow_new();
    cxx_site_new_deleted();
    unsigned long sum = exceptions();
    sum += containers();
    // Read what the sites keep, so the compiler cannot drop the allocations.
    for (Obj *o : keep_new) sum += static_cast<unsigned long>(o->a[0]);
    for (char *c : keep_array) sum += c ? static_cast<unsigned char>(c[5]) : 1;
    for (Aligned *a : keep_aligned) sum += static_cast<unsigned char>(a->x[3]);
    for (Obj *o : keep_nothrow) sum += static_cast<unsigned long>(o->a[2]);
    std::printf("checksum=%lu\n", sum);
    std::printf("site cxx_site_new size=%zu alloc_objects=300 alloc_bytes=%zu live_objects=300 "
                "live_bytes=%zu live_usable=unknown exact_alloc=1\n",
                sizeof(Obj), 300 * sizeof(Obj), 300 * sizeof(Obj));
    std::printf("site cxx_site_new_array size=100 alloc_objects=200 alloc_bytes=20000 live_objects=100 "
                "live_bytes=10000 live_usable=unknown exact_alloc=1\n");
    std::printf("site cxx_site_aligned_new size=%zu alloc_objects=50 alloc_bytes=%zu live_objects=50 "
                "live_bytes=%zu live_usable=unknown exact_alloc=1\n",
                sizeof(Aligned), 50 * sizeof(Aligned), 50 * sizeof(Aligned));
    std::printf("site cxx_site_nothrow_new size=%zu alloc_objects=40 alloc_bytes=%zu live_objects=40 "
                "live_bytes=%zu live_usable=unknown exact_alloc=1\n",
                sizeof(Obj), 40 * sizeof(Obj), 40 * sizeof(Obj));
    std::printf("site cxx_site_new_deleted size=%zu alloc_objects=500 alloc_bytes=%zu live_objects=0 "
                "live_bytes=0 live_usable=unknown exact_alloc=1\n",
                sizeof(Obj), 500 * sizeof(Obj));
    return 0;
}
