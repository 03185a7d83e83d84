// C++ test program for heapdiff's names: templates, overloads, constructors,
// lambdas, an anonymous namespace, std::string, make_shared, make_unique.
// The containers are leaked, so everything is live at the final dump.
#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#define NOINLINE __attribute__((noinline))

struct Session {
    char state[200];
};
struct Blob {
    char data[96];
};

// Leaked on purpose: still live when the final dump is written.
static auto &sessions = *new std::vector<std::shared_ptr<Session>>;
static auto &blobs = *new std::vector<std::unique_ptr<Blob>>;
static auto &strings = *new std::vector<std::string>;
static auto &lists = *new std::list<std::vector<int>>;
static auto &table = *new std::map<int, std::string>;

namespace {
NOINLINE void make_sessions(int n) {
    for (int i = 0; i < n; i++) sessions.push_back(std::make_shared<Session>());
}
}  // namespace

template <typename T>
struct Pool {
    NOINLINE std::unique_ptr<T> take() { return std::make_unique<T>(); }
};

NOINLINE void fill(std::map<int, std::string> &m, int n) {
    for (int i = 0; i < n; i++) m.emplace(i, std::string(64, 'x'));
}
NOINLINE void fill(std::list<std::vector<int>> &l, int n) {
    for (int i = 0; i < n; i++) l.emplace_back(std::vector<int>(32, i));
}

int main() {
    sessions.reserve(100);
    blobs.reserve(100);
    strings.reserve(100);
    make_sessions(100);
    Pool<Blob> pool;
    for (int i = 0; i < 100; i++) blobs.push_back(pool.take());
    auto make_string = [](int n) { strings.push_back(std::string(n, 'y')); };
    for (int i = 0; i < 100; i++) make_string(300);
    fill(table, 50);
    fill(lists, 50);
    std::printf("sessions %zu blobs %zu strings %zu\n", sessions.size(), blobs.size(), strings.size());
    return 0;
}
